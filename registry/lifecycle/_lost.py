"""Runs lost to an infrastructure failure: re-queued, and bounded when lost before they started.

A run lost after its ranks started (a host partitioned mid-training) is re-queued at once and
charged nowhere, as in Determined: the trial resumes from its latest checkpoint. A run lost
*before* its ranks started (the launch or the unpacking failed on the host, the host died
between its claim and the start, a pool's batch job ended before its ranks reported started)
made no progress, and the same cause tends to repeat: re-queued at once, such a run loops
forever (one batch job after another). So each such loss in a row waits an exponential back-off
(``HEADWAY_LOST_BACKOFF_SECONDS``, doubling, at most ``HEADWAY_LOST_BACKOFF_MAX_SECONDS``)
before its next run may be placed, and the ``max_lost_before_start``-th (experiment config,
default 3) ends the trial ERROR with the cause in its log and scheduling message. A run that
starts resets the count (``trial_run_running``). The back-off is the idea of Kubernetes'
``CrashLoopBackOff`` (10 s doubling to a cap); the bound that of batch schedulers' own
requeue limits on jobs that fail at launch.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from registry.errors import StoredConfigInvalid
from registry.lifecycle._common import trial_end
from registry.lifecycle._host_health import host_failed_start
from registry.models import RunState, State, Trial, TrialLog, TrialRun
from registry.scheduling import backoff_message, gave_up_message, lost_message, schedule_run

logger = logging.getLogger("headway.lifecycle")

# Used while a trial's stored config does not validate (it is never placed then anyway).
DEFAULT_MAX_LOST_BEFORE_START = 3


def started(run: TrialRun) -> bool:
    """Whether the run's ranks reported started (it reached RUNNING). Read before its exit
    is recorded: a QUEUED or STARTING run was lost before it started."""
    return run.state == RunState.RUNNING


def backoff(losses: int) -> float:
    """Seconds the next run waits after ``losses`` (>= 1) losses in a row before start:
    ``HEADWAY_LOST_BACKOFF_SECONDS * 2 ** (losses - 1)``, at most
    ``HEADWAY_LOST_BACKOFF_MAX_SECONDS``."""
    base = settings.HEADWAY_LOST_BACKOFF_SECONDS
    return min(base * 2.0 ** min(losses - 1, 32), settings.HEADWAY_LOST_BACKOFF_MAX_SECONDS)


def after_lost_run(trial: Trial, run: TrialRun, was_started: bool, why: str) -> None:
    """Decide what follows a lost run of the ACTIVE, locked ``trial`` (see module); ``why``
    names the cause (``host gpu-b lost``), ``was_started`` is ``started(run)`` before its exit.

    Writes the trial's scheduling message and one ``[headway]`` log line saying what happened.
    """
    slots = run.slots_needed or 1  # the lost run's, copied from the validated config
    if was_started:
        logger.warning("trial %s run %s: %s; re-queued", trial.id, run.run_id, why)
        schedule_run(trial)
        _say(trial, run, lost_message(why, slots))
        return
    # Drained (a per-run pool's nodes: as its type decides) at HEADWAY_HOST_MAX_FAILED_STARTS
    # in a row.
    host_failed_start(run.host_id, why, trial_id=trial.id, run_id=run.run_id)
    trial.lost_before_start += 1
    trial.save(update_fields=["lost_before_start"])
    losses, limit = trial.lost_before_start, _limit(trial)
    if losses >= limit:
        logger.error(
            "trial %s run %s: %s; lost before start %s times in a row: ERROR",
            trial.id, run.run_id, why, losses,
        )  # fmt: skip
        trial_end(trial, State.ERROR)
        _say(trial, run, gave_up_message(why, losses, limit))
        return
    delay = backoff(losses)
    at = timezone.now() + timedelta(seconds=delay)
    logger.warning(
        "trial %s run %s: %s; lost before start (%s of %s), re-queued after %g s",
        trial.id, run.run_id, why, losses, limit, delay,
    )  # fmt: skip
    queued = schedule_run(trial)
    queued.not_before = at
    queued.save(update_fields=["not_before"])
    _say(trial, run, backoff_message(why, losses, limit, at, delay))


def _limit(trial: Trial) -> int:
    try:
        return trial.experiment.conf.max_lost_before_start
    except StoredConfigInvalid:
        return DEFAULT_MAX_LOST_BEFORE_START


def _say(trial: Trial, run: TrialRun, message: str) -> None:
    message = message[:500]
    Trial.objects.filter(id=trial.id).update(scheduling_message=message)
    trial.scheduling_message = message
    TrialLog.objects.create(
        trial_id=trial.id, run_id=run.run_id, message=f"[headway] run {run.run_id}: {message}"
    )
