"""Controls of one trial: pause, activate, cancel, kill (also one trial inside a search).

Each ``*_locked`` function expects the trial row locked by the caller (experiment controls
reuse them); the public functions lock, act and refresh the experiment.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from registry.errors import IllegalTransition
from registry.lifecycle._common import live_run, refresh_experiment, trial_end
from registry.lifecycle._transitions import TRIAL_CONTROLS, check_control
from registry.models import RunState, State, StopReason, Trial, lock_trial
from registry.scheduling import drop_queued_run, schedule_run


def _acts(trial: Trial, control: str) -> bool:
    return check_control(TRIAL_CONTROLS, control, f"trial {trial.id}", trial.state)


def _refuse_unmanaged(trial: Trial, control: str) -> None:
    """An unmanaged trial runs as long as its script: nothing could re-launch it after a pause.

    Raises:
        IllegalTransition: (409) for a trial of an unmanaged experiment.
    """
    if trial.experiment.unmanaged:
        raise IllegalTransition(
            f"trial {trial.id} is unmanaged (its script runs outside the cluster): {control} "
            "does not apply; cancel or kill ask the script to stop (should_preempt)"
        )


def trial_pause_locked(trial: Trial) -> None:
    """ACTIVE → PAUSED: a queued run is dropped; a running one is asked to checkpoint and exit."""
    _refuse_unmanaged(trial, "pause")
    if not _acts(trial, "pause"):
        return
    trial.state = State.PAUSED
    trial.save(update_fields=["state"])
    run = live_run(trial)
    if run is None:
        return
    if run.state == RunState.QUEUED:
        drop_queued_run(run)
    else:
        run.stop_requested = StopReason.PAUSE
        run.save(update_fields=["stop_requested"])


def trial_activate_locked(trial: Trial) -> None:
    """PAUSED → ACTIVE: re-queue (the new run resumes from the latest checkpoint).

    If the pausing run has not exited yet, its stop request is withdrawn; if it already
    acknowledged, ``trial_run_exited`` re-queues the trial when it exits.
    """
    _refuse_unmanaged(trial, "activate")
    if not _acts(trial, "activate"):
        return
    trial.state = State.ACTIVE
    trial.save(update_fields=["state"])
    run = live_run(trial)
    if run is None:
        schedule_run(trial)
    elif not run.preempt_acknowledged:
        run.stop_requested = StopReason.NONE
        run.save(update_fields=["stop_requested"])


def _stop_locked(trial: Trial, stopping: State, reason: StopReason) -> None:
    if not _acts(trial, reason):
        return
    run = live_run(trial)
    if run is None or run.state == RunState.QUEUED:
        if run is not None:
            drop_queued_run(run)
        trial_end(trial, State.CANCELED)
        return
    trial.state = stopping
    trial.save(update_fields=["state"])
    run.stop_requested = reason
    run.save(update_fields=["stop_requested"])


def trial_cancel_locked(trial: Trial) -> None:
    """Stop gracefully with a checkpoint; the trial ends CANCELED and is not resumed."""
    _stop_locked(trial, State.STOPPING_CANCELED, StopReason.CANCEL)


def trial_kill_locked(trial: Trial) -> None:
    """Terminate the process now (the worker sends SIGTERM, then SIGKILL); ends CANCELED."""
    _stop_locked(trial, State.STOPPING_KILLED, StopReason.KILL)


def _control(trial_id: int, action: Callable[[Trial], None]) -> Trial:
    with transaction.atomic():
        trial = lock_trial(trial_id)
        action(trial)
        refresh_experiment(trial.experiment_id)
        return trial


def trial_pause(*, trial_id: int) -> Trial:
    """Pause one trial. Raises ``IllegalTransition`` unless ACTIVE (PAUSED is a no-op)."""
    return _control(trial_id, trial_pause_locked)


def trial_activate(*, trial_id: int) -> Trial:
    """Resume one paused trial. Raises ``IllegalTransition`` unless PAUSED (ACTIVE is a no-op)."""
    return _control(trial_id, trial_activate_locked)


def trial_cancel(*, trial_id: int) -> Trial:
    """Cancel one trial gracefully. Raises ``IllegalTransition`` when it already ended."""
    return _control(trial_id, trial_cancel_locked)


def trial_kill(*, trial_id: int) -> Trial:
    """Kill one trial's process. Raises ``IllegalTransition`` when it already ended."""
    return _control(trial_id, trial_kill_locked)
