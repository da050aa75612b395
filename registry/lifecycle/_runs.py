"""A trial's runs: claimed by a worker, heartbeating, acknowledging a stop, exiting or lost."""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from django.db import transaction
from django.db.models import Q, Subquery
from django.utils import timezone

from headway.early_exit import EarlyExitReason
from registry.lifecycle._common import (
    apply_deferred_operations,
    refresh_experiment,
    trial_end,
)
from registry.lifecycle._host_health import host_started_a_run
from registry.lifecycle._log_policies import retries_cancelled
from registry.lifecycle._lost import after_lost_run, started
from registry.lifecycle._search import deliver_event, has_pending_operation
from registry.models import (
    Experiment,
    RunShare,
    RunState,
    State,
    StopReason,
    Trial,
    TrialLog,
    TrialRun,
    lock_trial,
)
from registry.scheduling import lapsed, request_placement, schedule_run
from registry.searcher import Event

logger = logging.getLogger("headway.lifecycle")


def trial_run_claim(*, trial_id: int, run_id: int, worker: str) -> TrialRun | None:
    """Claim a queued run for ``worker``; None when it was already claimed or is stale.

    A conditional UPDATE makes redelivered or duplicated tasks harmless: only one claimer sees
    a row change.
    """
    claimed = TrialRun.objects.filter(
        trial_id=trial_id, run_id=run_id, state=RunState.QUEUED, trial__state=State.ACTIVE
    ).update(
        state=RunState.STARTING,
        worker=worker,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        # What the process is told to train to (cluster info); a later operation is a later
        # run's to train.
        searcher_length=Subquery(Trial.objects.filter(id=trial_id).values("searcher_length")[:1]),
    )
    if claimed != 1:
        return None
    return TrialRun.objects.select_related("trial__experiment").get(
        trial_id=trial_id, run_id=run_id
    )


def trial_run_running(*, trial_id: int, run_id: int) -> None:
    """Mark a claimed run as RUNNING (its process started); the trial's and its host's counts
    of runs lost before start begin again (``_lost.py``, ``_host_health.py``)."""
    if TrialRun.objects.filter(trial_id=trial_id, run_id=run_id, state=RunState.STARTING).update(
        state=RunState.RUNNING, heartbeat_at=timezone.now()
    ):
        Trial.objects.filter(id=trial_id, lost_before_start__gt=0).update(lost_before_start=0)
        host_started_a_run(
            TrialRun.objects.filter(trial_id=trial_id, run_id=run_id)
            .values_list("host_id", flat=True)
            .first()
        )


def trial_run_heartbeat(*, trial_id: int, run_id: int) -> str:
    """Record that the worker running this run is alive; return the run's stop request."""
    TrialRun.objects.filter(trial_id=trial_id, run_id=run_id).exclude(state=RunState.EXITED).update(
        heartbeat_at=timezone.now()
    )
    return (
        TrialRun.objects.filter(trial_id=trial_id, run_id=run_id)
        .values_list("stop_requested", flat=True)
        .first()
        or StopReason.NONE
    )


def trial_run_preempt(*, trial_id: int, run_id: int) -> bool:
    """Ask a running process to checkpoint and stop so its trial resumes elsewhere.

    Used when the worker running it shuts down. The trial stays ACTIVE: the process's exit 0
    after acknowledging re-queues it (``trial_run_exited``). Returns False when the run has
    exited or already has a stop request (a pause, cancel or kill wins).
    """
    return bool(
        TrialRun.objects.filter(trial_id=trial_id, run_id=run_id, stop_requested=StopReason.NONE)
        .exclude(state=RunState.EXITED)
        .update(stop_requested=StopReason.PREEMPT)
    )


def trial_preempt_acknowledge(*, trial_id: int, run_id: int) -> bool:
    """The process checkpointed after a stop request and will exit 0 to be resumed later.

    Returns False when the run has no pending stop request (nothing to acknowledge).
    """
    return bool(
        TrialRun.objects.filter(trial_id=trial_id, run_id=run_id)
        .exclude(stop_requested=StopReason.NONE)
        .exclude(state=RunState.EXITED)
        .update(preempt_acknowledged=True)
    )


def trial_run_exited(
    *, trial_id: int, run_id: int, exit_code: int | None, reason: str = ""
) -> Trial:
    """Record a run's exit (``exit_code=None``: lost to an infrastructure failure, ``reason``
    saying which, e.g. ``host gpu-b lost``) and decide what is next.

    By the trial's state: STOPPING_CANCELED/KILLED → CANCELED; PAUSED stays PAUSED (activate
    resumes it); ACTIVE: exit 0 after acknowledging a stop → re-queued (resume), exit 0 →
    COMPLETED, lost worker → re-queued (not counted as a restart), failure → re-queued from the
    latest checkpoint while ``restarts < max_restarts`` and no ``cancel_retries`` log policy
    matched its output (``_log_policies``), else ERROR. A report for a run that
    already exited (a retried task) changes nothing. Shares of the run never claimed end with
    it (no QUEUED row stays behind). A lost run's trial says so in its scheduling message and
    log (``host gpu-b lost: re-queued, not counted as a restart; waiting for 4 slots``).
    """
    with transaction.atomic():
        trial = lock_trial(trial_id)
        run = (
            TrialRun.objects.select_for_update(no_key=True)
            .filter(trial_id=trial_id, run_id=run_id)
            .first()
        )
        if run is None or run.state == RunState.EXITED:
            return trial
        was_started = started(run)  # a loss before start is bounded (_lost.py)
        run.state = RunState.EXITED
        run.exit_code = exit_code
        run.ended_at = timezone.now()
        run.save(update_fields=["state", "exit_code", "ended_at"])
        RunShare.objects.filter(run=run, state=RunState.QUEUED).update(
            state=RunState.EXITED, ended_at=run.ended_at
        )
        # Its slots are free for a queued run on commit. Never waiting for a running pass (as
        # heartbeats): concurrent exits share one pass instead of running one each, in turn.
        request_placement(run.namespace, wait=False)
        if trial.run_id != run_id:
            return trial  # a superseded run; the trial moved on already
        if trial.state in (State.STOPPING_CANCELED, State.STOPPING_KILLED):
            trial_end(trial, State.CANCELED)
        elif trial.state == State.ACTIVE:
            _after_active_run(trial, run, exit_code, reason, was_started)
        refresh_experiment(trial.experiment_id)
    return trial


def _after_active_run(
    trial: Trial, run: TrialRun, exit_code: int | None, reason: str, was_started: bool
) -> None:
    if exit_code == 0 and run.stop_requested == StopReason.CLOSE:
        trial_end(trial, State.COMPLETED)  # the searcher closed it: not resumed
    elif exit_code == 0 and run.preempt_acknowledged:
        schedule_run(trial)  # preempted, then activated before it exited: resume
    elif exit_code == 0 and _operation_issued_after_start(trial, run):
        schedule_run(trial)  # e.g. promoted by ASHA while it was stopping: resume
    elif exit_code == 0:
        trial_end(trial, State.COMPLETED)
    elif exit_code is None:
        # An infrastructure failure (host lost, partitioned, worker killed or shut down):
        # Determined does not count it against max_restarts, nor does Headway; before start,
        # max_lost_before_start bounds it.
        why = reason or f"the worker of run {run.run_id} was lost"
        after_lost_run(trial, run, was_started, why)
    elif _may_restart(trial, run):
        trial.restarts += 1
        trial.save(update_fields=["restarts"])
        logger.warning(
            "trial %s run %s exited with %s; restart %s",
            trial.id,
            run.run_id,
            exit_code,
            trial.restarts,
        )
        schedule_run(trial)
    else:
        trial_end(trial, State.ERROR)


def _may_restart(trial: Trial, run: TrialRun) -> bool:
    """Restarts are left (``max_restarts``) and no ``cancel_retries`` log policy matched.

    Raises ``StoredConfigInvalid`` (409) when the stored config no longer validates, as the
    searcher does: ``max_restarts`` is not guessed."""
    if trial.restarts >= trial.experiment.conf.max_restarts:
        return False
    return not retries_cancelled(trial, run)


def _operation_issued_after_start(trial: Trial, run: TrialRun) -> bool:
    """The searcher gave the trial a longer operation that this run was never told about."""
    return (
        has_pending_operation(trial)
        and not trial.searcher_closed
        and not trial.early_exit
        and (run.searcher_length or 0) < (trial.searcher_length or 0)
    )


def reap_lost_runs(*, timeout: timedelta | None = None) -> list[tuple[int, int]]:
    """Treat runs whose lease lapsed as lost and re-queue their trials (not counted as
    restarts); end the shares whose lease lapsed as lost (their run's chief then stops and
    re-queues the run). A lease lapses the lease plus its margin after its last renewal while
    the master serves the run's namespace, and only after the outage tolerance plus the margin
    while it serves no host of it (``registry.scheduling.lease_cutoff``: the master's own
    outage is not counted against a host); ``timeout`` (tests, tools) judges every lease by
    that expiry instead. Also applies searcher operations left deferred
    (``apply_deferred_operations``).

    Returns the ``(trial_id, run_id)`` pairs of the runs reaped. Safe to run from several places
    at once: ``trial_run_exited`` ignores runs that already exited, shares end conditionally.
    """
    now = timezone.now()
    live = [RunState.STARTING, RunState.RUNNING]
    reaped: list[tuple[int, int]] = []
    for found, expiry in lapsed("namespace", now, timeout):
        stale = list(
            TrialRun.objects.filter(found, state__in=live).values_list(
                "trial_id", "run_id", "host__name"
            )
        )
        for trial_id, run_id, host in stale:
            reason = f"host {host or '?'} lost (no lease renewal for {expiry.total_seconds():g} s)"
            trial_run_exited(trial_id=trial_id, run_id=run_id, exit_code=None, reason=reason)
        reaped += [(trial_id, run_id) for trial_id, run_id, _ in stale]
    for found, expiry in lapsed("run__namespace", now, timeout):
        _reap_lost_shares(found, expiry)
    # Searcher operations deferred by a process that died before applying them after commit.
    for experiment_id in Experiment.objects.filter(searcher_state__has_key="deferred").values_list(
        "id", flat=True
    ):
        apply_deferred_operations(experiment_id)
    return reaped


def _reap_lost_shares(found: Q, timeout: timedelta) -> None:
    """End as lost (exit code None) the started shares ``found`` selects (their lease lapsed
    by ``timeout``)."""
    lapsed_shares = RunShare.objects.filter(found, state__in=[RunState.STARTING, RunState.RUNNING])
    for pk, trial_id, run_id, node, host in lapsed_shares.values_list(
        "id", "run__trial_id", "run__run_id", "node_rank", "host__name"
    ):
        ended = RunShare.objects.filter(
            found, id=pk, state__in=[RunState.STARTING, RunState.RUNNING]
        ).update(state=RunState.EXITED, exit_code=None, ended_at=timezone.now())
        if ended:
            logger.warning("trial %s run %s node %s: host %s lost", trial_id, run_id, node, host)
            TrialLog.objects.create(
                trial_id=trial_id,
                run_id=run_id,
                message=f"[headway] host {host} lost: node {node} renewed no lease for "
                f"{timeout.total_seconds():g} s",
            )


def trial_report_progress(*, trial_id: int, progress: float) -> None:
    """Store a trial's training progress in [0, 1] (clamped) and refresh its experiment's."""
    progress = min(max(float(progress), 0.0), 1.0)
    with transaction.atomic():
        trial = lock_trial(trial_id)
        trial.progress = progress
        trial.save(update_fields=["progress"])
        refresh_experiment(trial.experiment_id)


def trial_searcher_completed(
    *, trial_id: int, length: int, metric: float | None, run_id: int | None = None
) -> int | None:
    """Record that a trial completed its operation of ``length`` with the searcher ``metric``;
    return the length of its next operation, or None when there is none.

    Delivers ``on_validation_completed(request_id, metric, length)`` to the searcher (a NaN or
    infinite metric arrives as None and is passed on as NaN). When the searcher answers with a
    ``ValidateAfter`` for this trial, the reporting run (``run_id``, default the current one)
    is told the new length and trains on; otherwise its process finishes and exits.
    """
    with transaction.atomic():
        trial = lock_trial(trial_id)
        trial.searcher_completed_length = max(trial.searcher_completed_length, int(length))
        trial.save(update_fields=["searcher_completed_length"])
        value = math.nan if metric is None else metric
        deliver_event(
            trial,
            Event.VALIDATION_COMPLETED,
            lambda s: s.on_validation_completed(trial.request_id, value, length),
        )
        if not has_pending_operation(trial) or trial.searcher_closed:
            return None
        TrialRun.objects.filter(trial=trial, run_id=run_id or trial.run_id).update(
            searcher_length=trial.searcher_length
        )
        return trial.searcher_length


def trial_report_early_exit(*, trial_id: int, reason: EarlyExitReason) -> Trial:
    """Record that a trial leaves its search early (``reason``, e.g. ``invalid_hp``).

    The searcher hears ``on_trial_exited_early(request_id, reason)`` when the trial ends (its
    process exits 0: it ends COMPLETED). The first reason reported wins; reports after the
    trial ended change nothing.
    """
    with transaction.atomic():
        trial = lock_trial(trial_id)
        if not trial.early_exit and not trial.is_terminal:
            trial.early_exit = EarlyExitReason(reason).value
            trial.save(update_fields=["early_exit"])
        return trial
