"""Submitting the queued runs of ``slurm`` pools as Slurm batch jobs.

Headway's own scheduler never places these runs (``registry.scheduling`` leaves slurm pools
out): each queued run becomes one job at once, and Slurm decides when and where it runs (gang
allocation, fair share, priorities, backfill). Per run, in one transaction:

1. A ``SlurmJob`` row, one ``WorkerHost`` per node of the job (``slurm-r<run pk>-n<i>``, never
   alive until the node process heartbeats) and a host token for each; the run is placed on
   node 0 and ``RunShare`` rows on the others, exactly as a placement over agents, so the node
   processes use the host API unchanged and reach only this run.
2. ``sbatch`` with the pool's settings (``_script.job_script``), ``--exclude`` naming the
   pool's nodes Headway excluded after failed starts (``_nodes``); the job id is stored.

A refused ``sbatch`` (bad partition, slurmctld down, every node the job could use excluded)
rolls all of it back and the trial says Slurm's message, and the excluded nodes if any; the
next reconciliation tries again.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.models import HostToken, RunShare, RunState, Trial, TrialRun, WorkerHost
from registry.pools import ResourcePool
from registry.pools.queue import queued_runs
from registry.pools.slurm._commands import SlurmError, submit
from registry.pools.slurm._nodes import excluded_nodes
from registry.pools.slurm._script import JobLayout, job_name, job_script
from registry.pools.slurm.models import SlurmJob
from registry.pools.slurm.settings import slurm_settings

logger = logging.getLogger("headway.slurm")


def node_host_name(run_pk: int, node: int) -> str:
    """The host a Slurm job's node ``node`` is to the master: ``slurm-r<run pk>-n<node>``."""
    return f"slurm-r{run_pk}-n{node}"


def submit_queued_runs(namespace: str, pools: dict[str, ResourcePool]) -> list[int]:
    """Submit every queued, unplaced run of ``pools`` (slurm pools by name) in ``namespace``;
    return the job ids submitted, in queue order (priority, then submission)."""
    submitted: list[int] = []
    for pk, pool in queued_runs(namespace, pools):
        excluded = excluded_nodes(namespace=namespace, pool=pool)
        try:
            job_id = _submit_run(pk, pools[pool], namespace, excluded)
        except SlurmError as exc:
            logger.warning("run %s could not be submitted to Slurm: %s", pk, exc)
            say(pk, f"waiting: Slurm refused the job ({exc}){_excluded_note(pool, excluded)}")
            continue
        if job_id is not None:
            submitted.append(job_id)
    return submitted


def _excluded_note(pool: str, excluded: list[str]) -> str:
    """The end of a refusal's message: which nodes the job was kept off, and how to undo it
    (Slurm's own message never says the job excluded them)."""
    if not excluded:
        return "; trying again"
    return (
        f"; the job excluded pool {pool}'s node(s) {', '.join(excluded)}, which Headway "
        f"excluded after runs failed to start there (headway pool enable-node {pool} NODE "
        "puts one back); trying again"
    )


def say(run_pk: int, message: str) -> None:
    """Show ``message`` as the scheduling message of run ``run_pk``'s trial (no write when it
    says that already: the reconciliation repeats it every poll)."""
    message = message[:500]
    Trial.objects.filter(runs__id=run_pk).exclude(scheduling_message=message).update(
        scheduling_message=message
    )


def job_work_dir(pool: ResourcePool) -> str:
    """Where a job of ``pool`` runs its runs and writes its output: the pool's ``work_dir``,
    else the master's ``HEADWAY_WORK_DIR``."""
    return slurm_settings(pool).work_dir or str(settings.HEADWAY_WORK_DIR)


def _submit_run(run_pk: int, pool: ResourcePool, namespace: str, excluded: list[str]) -> int | None:
    """One run's hosts, tokens and job (see module), kept off the ``excluded`` nodes; None
    when it was taken meanwhile or cannot be laid out (its trial says why).

    Raises:
        SlurmError: sbatch refused the job; nothing was written.
    """
    options = slurm_settings(pool)
    with transaction.atomic():
        run = (
            TrialRun.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(id=run_pk, state=RunState.QUEUED, host__isnull=True)
            .first()
        )
        if run is None:
            return None
        if run.slots_needed is None:
            return None  # its stored config did not validate: the trial already says so
        layout = options.nodes_for(max(run.slots_needed, 1))
        if layout is None:
            say(
                run.pk,
                f"not submitted: slots_per_trial {run.slots_needed} is not a multiple of pool "
                f"{pool.name}'s slots_per_node {options.slots_per_node}",
            )
            return None
        nodes, per_node = layout
        job = SlurmJob.objects.create(run=run, pool=pool.name)
        devices = [f"cpu{i}" for i in range(per_node)]
        hosts = [
            WorkerHost.objects.create(
                name=node_host_name(run.pk, node),
                pool=pool.name,
                namespace=namespace,
                queue="",
                slots=per_node,
                devices=devices,
                heartbeat_at=None,
                made_for_run=run,
            )
            for node in range(nodes)
        ]
        keys = [HostToken.issue(host.name)[1] for host in hosts]
        run.host, run.slots, run.devices = hosts[0], per_node, devices
        run.heartbeat_at = timezone.now()
        run.save(update_fields=["host", "slots", "devices", "heartbeat_at"])
        RunShare.objects.bulk_create(
            RunShare(run=run, node_rank=node, host=host, slots=per_node, devices=devices)
            for node, host in enumerate(hosts[1:], start=1)
        )
        work_dir = job_work_dir(pool)
        python = options.python or sys.executable
        Path(work_dir).mkdir(parents=True, exist_ok=True)  # the job's output file goes there
        script = job_script(
            options,
            JobLayout(nodes, per_node),
            name=job_name(namespace, run.trial_id, run.run_id),
            python=python,
            work_dir=work_dir,
            environment=_job_environment(run, pool, namespace, hosts, keys, work_dir, python),
            exclude=excluded,
        )
        job.job_id = submit(script)
        job.state = "PENDING"
        job.save(update_fields=["job_id", "state"])
    logger.info(
        "trial %s run %s submitted as Slurm job %s (%s node(s) x %s slot(s))",
        run.trial_id, run.run_id, job.job_id, nodes, per_node,
    )  # fmt: skip
    say(run.pk, f"waiting in Slurm: job {job.job_id} submitted to pool {pool.name}")
    return job.job_id


def _job_environment(
    run: TrialRun,
    pool: ResourcePool,
    namespace: str,
    hosts: list[WorkerHost],
    keys: list[str],
    work_dir: str,
    python: str,
) -> dict[str, str]:
    """What the node processes get (and nothing of the master's own environment)."""
    options = slurm_settings(pool)
    return {
        "HEADWAY_MASTER": options.master_url or settings.HEADWAY_MASTER_URL,
        "HEADWAY_QUEUE": namespace,
        "HEADWAY_RESOURCE_POOL": pool.name,
        "HEADWAY_TRIAL_ID": str(run.trial_id),
        "HEADWAY_RUN_ID": str(run.run_id),
        "HEADWAY_SLURM_HOSTS": ",".join(host.name for host in hosts),
        "HEADWAY_SLURM_HOST_KEYS": ",".join(keys),
        # CPU slots by count: GPUs come from Slurm's own CUDA_VISIBLE_DEVICES (gres), which the
        # trial inherits (workers.launch sets it only on agent GPU hosts).
        "HEADWAY_SLOTS": str(run.slots),
        "HEADWAY_WORK_DIR": work_dir,
        "HEADWAY_VAR_DIR": work_dir,
        "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
    }
