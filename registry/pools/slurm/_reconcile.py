"""Keeping each run's state and its Slurm job's state in step.

Every ``HEADWAY_SLURM_POLL_SECONDS`` the master's worker reads the state of the jobs it has not
finished with (one ``squeue`` call) and, per job:

- pending: the trial says why Slurm holds it (``waiting in Slurm: job 12 pending (Priority)``);
- running while its run was closed meanwhile (paused or killed before it started) or is being
  killed: ``scancel`` (kill is scancel; pause and cancel go through ``should_preempt()`` as
  on agents and the job ends by itself);
- ended while its run had not: cancelled, time limit, node failure, preemption, or gone from
  ``squeue`` are an infrastructure failure, so the run is lost (re-queued as a new job, not
  counted against ``max_restarts``); a job that completed or failed by its own processes
  without the run's exit reaching the master (after its ranks started) is that exit
  code, counted as a failure; its output's last lines go to the trial's log;
- ended, however, before its run's ranks reported started (the run still QUEUED or STARTING):
  the run is lost before start (re-queued after a back-off, the trial ERROR after
  ``max_lost_before_start`` such losses in a row: ``registry.lifecycle._lost``), with the
  job's output in the trial's log; a broken set-up (a node process that cannot start) ends so
  instead of looping one job after another; the lifecycle counts a failed start on each of
  the job's nodes (recorded here: squeue lists an ended job's nodes too), and one that reaches
  ``HEADWAY_HOST_MAX_FAILED_STARTS`` in a row is excluded from the pool's later jobs
  (``_nodes``);
- running with its nodes first known while its run's ranks already started: those nodes'
  counts of failed starts begin again (the lifecycle resets them too when the ranks report
  started, if the job's nodes were known then);
- ended, its run too: the job's hosts are removed and their tokens revoked (``cleaned``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.models import HostToken, RunState, StopReason, TrialLog, TrialRun
from registry.pools import ResourcePool
from registry.pools.slurm._commands import SlurmJob as SeenJob
from registry.pools.slurm._commands import cancel, jobs
from registry.pools.slurm._nodes import nodes_started
from registry.pools.slurm._submit import job_work_dir, say
from registry.pools.slurm.models import SlurmJob

logger = logging.getLogger("headway.slurm")

# A job missing from squeue this long after its submission is gone (a just-submitted job is
# always listed; the margin covers a slurmctld restart in between).
VANISHED_AFTER = timedelta(seconds=60)
# How long a job may keep running after its run's exit was recorded (the node processes mark
# their hosts stopped and exit) before it is cancelled.
LINGER_AFTER_EXIT = timedelta(seconds=60)
# Lines of the job's output file copied to the trial's log when the job ended on its own.
OUTPUT_TAIL_LINES = 30

RunExited = Callable[..., object]


def reconcile_jobs(namespace: str, pools: dict[str, ResourcePool], run_exited: RunExited) -> None:
    """One reconciliation of ``namespace``'s unfinished jobs (see module).

    ``run_exited`` is ``registry.lifecycle.trial_run_exited`` (passed in: this package is
    below the lifecycle, which imports the scheduling it builds on).

    Raises:
        SlurmError: squeue failed (slurmctld unreachable): nothing is concluded from silence.
    """
    unfinished = list(
        SlurmJob.objects.unfinished()
        .filter(run__namespace=namespace, job_id__isnull=False)
        .select_related("run")
    )
    if not unfinished:
        return
    seen = jobs(job.job_id for job in unfinished if job.job_id is not None)
    now = timezone.now()
    for job in unfinished:
        found = seen.get(job.job_id or 0)
        if found is None and now - job.submitted_at < VANISHED_AFTER:
            continue
        if found is not None and found.active:
            _active(job, found)
        else:
            _ended(job, found, pools.get(job.pool), run_exited)


def _active(job: SlurmJob, found: SeenJob) -> None:
    nodes_seen = found.nodes and found.nodes != job.nodes
    if (job.state, job.reason, job.nodes) != (found.state, found.reason, found.nodes):
        job.state, job.reason, job.nodes = found.state, found.reason, found.nodes
        job.save(update_fields=["state", "reason", "nodes"])
    run = (
        TrialRun.objects.filter(id=job.run_id).values("state", "stop_requested", "ended_at").first()
    )
    if run is None:
        return
    if nodes_seen and run["state"] == RunState.RUNNING:
        # Its ranks reported started before this poll saw where the job runs.
        nodes_started(namespace=job.run.namespace, pool=job.pool, nodes=job.nodes)
    if run["state"] == RunState.EXITED and found.state == "PENDING":
        # Closed before it started (paused, killed, its experiment ended): nothing to wait for.
        logger.info("Slurm job %s: its run was closed before it started; scancel", job.job_id)
        cancel(found.job_id)
    elif run["state"] == RunState.EXITED and _exited_before(run["ended_at"], LINGER_AFTER_EXIT):
        # The run's exit was reported long ago and its node processes still hold the nodes.
        logger.warning("Slurm job %s outlived its run's exit; scancel", job.job_id)
        cancel(found.job_id)
    elif run["stop_requested"] == StopReason.KILL:
        cancel(found.job_id)  # kill is scancel: SIGTERM to every process, SIGKILL after KillWait
    elif run["state"] == RunState.QUEUED and found.state == "PENDING":
        # Slurm sets a reason at its first scheduling pass; until then it says "None".
        why = f" ({found.reason})" if found.reason not in ("", "None") else ""
        say(job.run_id, f"waiting in Slurm: job {found.job_id} pending{why}")


def _exited_before(ended_at: datetime | None, age: timedelta) -> bool:
    return ended_at is not None and timezone.now() - ended_at > age


def _ended(
    job: SlurmJob, found: SeenJob | None, pool: ResourcePool | None, run_exited: RunExited
) -> None:
    run = job.run
    state = found.state if found is not None else "GONE"
    with transaction.atomic():
        job.state = state
        job.reason = found.reason if found is not None else "no longer listed by squeue"
        job.exit_code = found.exit_code if found is not None else None
        job.ended_at = job.ended_at or timezone.now()
        # A job that started and ended between two polls: its nodes are known only now.
        job.nodes = (found.nodes if found is not None else "") or job.nodes
        job.save(update_fields=["state", "reason", "exit_code", "ended_at", "nodes"])
    run.refresh_from_db(fields=["state"])
    if run.state in (RunState.QUEUED, RunState.STARTING):
        # Its ranks never reported started: whatever ended the job (a node process that
        # cannot start, a node failure, a cancel), the run is lost before start, which the
        # lifecycle re-queues after a back-off and bounds (max_lost_before_start).
        status = f", exit code {found.exit_code}" if found is not None and found.exit_code else ""
        why = f"Slurm job {job.job_id} ended {state}{_reason(found)}{status}"
        _copy_output(job, pool, run)
        run_exited(trial_id=run.trial_id, run_id=run.run_id, exit_code=None, reason=why)
    elif run.state != RunState.EXITED:
        if found is None or found.ended_by_infrastructure:
            why = f"Slurm job {job.job_id} ended {state}{_reason(found)}"
            run_exited(trial_id=run.trial_id, run_id=run.run_id, exit_code=None, reason=why)
        else:
            code = found.exit_code if found.exit_code else 1
            _copy_output(job, pool, run)
            TrialLog.objects.create(
                trial_id=run.trial_id,
                run_id=run.run_id,
                message=f"[headway] Slurm job {job.job_id} ended {state} (exit code "
                f"{found.exit_code}) before the run reported its exit: counted as exit code {code}",
            )
            run_exited(trial_id=run.trial_id, run_id=run.run_id, exit_code=code)
    _clean(job)


def _reason(found: SeenJob | None) -> str:
    """`` (Slurm's reason)`` when the job has one, else ``""``."""
    return f" ({found.reason})" if found is not None and found.reason not in ("", "None") else ""


def _copy_output(job: SlurmJob, pool: ResourcePool | None, run: TrialRun) -> None:
    """The last lines of the job's output file (``--output``), when the master can read it
    (a shared work directory), so the trial's failure box shows why the job failed."""
    work_dir = job_work_dir(pool) if pool is not None else str(settings.HEADWAY_WORK_DIR)
    path = Path(work_dir) / f"slurm-{job.job_id}.out"
    try:
        lines = path.read_text(errors="replace").splitlines()[-OUTPUT_TAIL_LINES:]
    except OSError:
        return
    TrialLog.objects.bulk_create(
        TrialLog(trial_id=run.trial_id, run_id=run.run_id, message=f"[slurm] {line}")
        for line in lines
    )


def _clean(job: SlurmJob) -> None:
    """The job ended and its run too: its hosts go and their tokens are revoked."""
    with transaction.atomic():
        names = list(job.hosts.values_list("name", flat=True))
        HostToken.objects.live().filter(name__in=names).update(revoked_at=timezone.now())
        job.hosts.all().delete()
        job.cleaned = True
        job.save(update_fields=["cleaned"])
