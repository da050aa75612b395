"""Helpers shared by the lifecycle modules: locking, ending a trial, deriving experiment state."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from registry.lifecycle._checkpoint_gc import request_checkpoint_gc
from registry.lifecycle._search import (
    apply_trial_operation,
    decode_operation,
    deferred_operations,
    deliver_trial_ended,
    searcher_for,
    with_deferred,
)
from registry.models import TERMINAL_STATES, Experiment, RunState, State, Trial, TrialRun
from registry.searcher import Event

STOPPING_STATES = frozenset({State.STOPPING_CANCELED, State.STOPPING_KILLED, State.STOPPING_ERROR})


def live_run(trial: Trial) -> TrialRun | None:
    """The trial's current run unless it has exited (or there is none)."""
    return (
        TrialRun.objects.select_for_update(no_key=True)
        .filter(trial=trial, run_id=trial.run_id)
        .exclude(state=RunState.EXITED)
        .first()
    )


def trial_end(trial: Trial, state: State) -> None:
    """Move a locked trial to a terminal state and tell the searcher (same transaction)."""
    trial.state = state
    trial.ended_at = timezone.now()
    if state == State.COMPLETED:
        trial.progress = 1.0
    trial.save(update_fields=["state", "ended_at", "progress"])
    deliver_trial_ended(trial, state)
    request_checkpoint_gc(trial.experiment_id, orphans=False)  # retention, once this commits


def refresh_experiment(experiment_id: int) -> Experiment:
    """Derive an experiment's progress and state from its trials (locks the experiment row).

    Progress is the searcher's (``SearchMethod.progress()``, e.g. ended trials / all trials of a
    random search) when it asks for ``Event.PROGRESS`` and has one, else the mean of the trials' progress.

    All trials ended (and no searcher operation is still deferred: it may resume one):
    COMPLETED if any completed (and the experiment was not being canceled),
    CANCELED if it was being canceled/killed or all trials were canceled, else ERROR; one being
    canceled or killed that has no trial at all ends CANCELED. Otherwise
    an ACTIVE/PAUSED experiment is PAUSED exactly when every unfinished trial is PAUSED.
    """
    experiment = Experiment.objects.select_for_update(no_key=True).get(id=experiment_id)
    rows = list(experiment.trials.values_list("state", "progress"))
    fields = ["progress", "state", "ended_at"]
    searcher = searcher_for(experiment)
    searched = searcher.progress() if searcher.wants(Event.PROGRESS) else None
    if searched is not None:
        experiment.progress = searched
    elif rows:
        experiment.progress = sum(p for _, p in rows) / len(rows)
    states = {s for s, _ in rows}
    if experiment.state in TERMINAL_STATES:
        pass
    elif (
        (rows or experiment.state in STOPPING_STATES)
        and states <= TERMINAL_STATES
        and not deferred_operations(experiment)
    ):
        # Stopping with no trial at all (an MLflow experiment never given a run): nothing
        # will end it later, so it ends CANCELED now.
        if experiment.state in STOPPING_STATES or states == {State.CANCELED}:
            experiment.state = State.CANCELED
        elif State.COMPLETED in states:
            experiment.state = State.COMPLETED
        else:
            experiment.state = State.ERROR
        experiment.ended_at = timezone.now()
        # Trials' latest checkpoints are no longer protected once the experiment has ended.
        request_checkpoint_gc(experiment.id)
    elif experiment.state in (State.ACTIVE, State.PAUSED):
        unfinished = states - TERMINAL_STATES
        experiment.state = State.PAUSED if unfinished == {State.PAUSED} else State.ACTIVE
    experiment.save(update_fields=fields)
    return experiment


def apply_deferred_operations(experiment_id: int) -> int:
    """Apply the experiment's deferred trial operations, each trial in its own transaction
    (trial locked before the experiment); return how many were applied. Idempotent."""
    searcher_state = (
        Experiment.objects.filter(id=experiment_id).values_list("searcher_state", flat=True).first()
    )
    request_ids = {str(op["request_id"]) for op in (searcher_state or {}).get("deferred", [])}
    applied = 0
    for request_id in sorted(request_ids, key=lambda r: (len(r), r)):
        with transaction.atomic():
            trial = (
                Trial.objects.select_for_update(no_key=True)
                .filter(experiment_id=experiment_id, request_id=request_id)
                .first()
            )
            experiment = Experiment.objects.select_for_update(no_key=True).get(id=experiment_id)
            remaining = []
            for data in deferred_operations(experiment):
                if str(data["request_id"]) != request_id:
                    remaining.append(data)
                elif trial is not None:
                    apply_trial_operation(experiment, trial, decode_operation(data))
                    applied += 1
            experiment.searcher_state = with_deferred(experiment.searcher_state, remaining)
            experiment.save(update_fields=["searcher_state"])
            refresh_experiment(experiment_id)
    return applied
