"""The registry's side of the searcher: deliver events, carry out the operations they return.

Each event runs with the experiment row locked and saves the searcher's state in the same
transaction as the change that caused it, so a restarted server resumes the search exactly
(Determined's searcher events; ``registry/searcher/``).

An operation for a trial this transaction holds (the trial the event is about, or one it just
created) is applied at once. One for another trial (an adaptive searcher promoting a waiting
trial) would have to lock that trial after the experiment, against the lock order (trials
first), so it is saved as *deferred* in the searcher state, in the same transaction, and
applied right after commit by ``apply_deferred_operations`` (locking trial, then experiment);
the lost-run reaper retries it if the process died in between.
"""

from __future__ import annotations

import dataclasses
import uuid as uuid_lib
from collections.abc import Callable
from typing import Any

from django.db import transaction

from headway.early_exit import EarlyExitReason
from registry.errors import StoredConfigInvalid
from registry.models import Experiment, RunState, State, StopReason, Trial, TrialRun
from registry.scheduling import schedule_run
from registry.searcher import (
    Close,
    Create,
    Event,
    Operation,
    SearchMethod,
    Shutdown,
    Stop,
    ValidateAfter,
    build_searcher,
)

TrialOperation = ValidateAfter | Close | Stop


def searcher_for(experiment: Experiment) -> SearchMethod:
    """The experiment's search method with its saved state loaded."""
    config = experiment.conf
    seed = config.reproducibility.experiment_seed
    if seed is None:  # the registry picks one at create: a stored config always has it
        raise StoredConfigInvalid(experiment.id, {"reproducibility.experiment_seed": ["missing"]})
    searcher = build_searcher(config, seed)
    searcher.load_state_dict(experiment.searcher_state)
    return searcher


def deferred_operations(experiment: Experiment) -> list[dict[str, Any]]:
    """Trial operations saved for after commit (``[{"op", "request_id", "length"?}]``)."""
    return list(experiment.searcher_state.get("deferred", []))


def with_deferred(state: dict[str, Any], deferred: list[dict[str, Any]]) -> dict[str, Any]:
    """``state`` with its ``deferred`` list replaced (left out when empty)."""
    state = {key: value for key, value in state.items() if key != "deferred"}
    return {**state, "deferred": deferred} if deferred else state


def _encode(op: TrialOperation) -> dict[str, Any]:
    return {"op": type(op).__name__, **dataclasses.asdict(op)}


def decode_operation(data: dict[str, Any]) -> TrialOperation:
    if data["op"] == "ValidateAfter":
        return ValidateAfter(str(data["request_id"]), int(data["length"]))
    if data["op"] == "Stop":
        return Stop(str(data["request_id"]))
    return Close(str(data["request_id"]))


def apply_operations(
    experiment: Experiment,
    searcher: SearchMethod,
    operations: list[Operation],
    warm_start: uuid_lib.UUID | None = None,
    in_hand: Trial | None = None,
) -> None:
    """Carry out operations and save the searcher's state; the caller holds the experiment lock
    (and ``in_hand``'s row lock, when given).

    ``Create`` makes a trial and queues its first run, then delivers ``on_trial_created`` (to a
    searcher that asks for it). Every
    trial of an experiment warm-starts from the same checkpoint: ``warm_start`` at creation,
    later the one its first trial got. In a PAUSED experiment the trial is created PAUSED with
    no run (activating the experiment queues it); a stopping or ended experiment creates no
    more trials (Determined ignores the searcher's operations then). ``ValidateAfter``,
    ``Close`` and ``Stop`` go to ``apply_trial_operation`` (deferred when the trial is not held).
    ``Shutdown`` marks the search as over.
    """
    pending = list(operations)
    shutdown = bool(experiment.searcher_state.get("shutdown"))
    deferred = deferred_operations(experiment)
    creates = experiment.state in (State.ACTIVE, State.PAUSED)
    held: dict[str, Trial] = {} if in_hand is None else {in_hand.request_id: in_hand}
    if warm_start is None and any(isinstance(op, Create) for op in pending):
        first = experiment.trials.order_by("id").values_list("warm_start_checkpoint", flat=True)
        warm_start = first.first()
    while pending:
        op = pending.pop(0)
        if isinstance(op, Create) and creates:
            trial = Trial.objects.create(
                experiment=experiment,
                request_id=op.request_id,
                hparams=op.hparams,
                seed=op.seed,
                warm_start_checkpoint=warm_start,
                state=experiment.state,
            )
            held[op.request_id] = trial
            if searcher.wants(Event.TRIAL_CREATED):
                pending.extend(searcher.on_trial_created(op.request_id))
            if trial.state == State.ACTIVE:
                schedule_run(trial)  # after its first operation is known
        elif isinstance(op, ValidateAfter | Close | Stop):
            if op.request_id in held:
                apply_trial_operation(experiment, held[op.request_id], op)
            else:
                deferred.append(_encode(op))
        elif isinstance(op, Shutdown):
            shutdown = True
    experiment.searcher_state = with_deferred(
        {**searcher.state_dict(), "shutdown": shutdown}, deferred
    )
    experiment.save(update_fields=["searcher_state"])
    if deferred:
        # Imported here: _common builds on this module (refresh_experiment, trial_end).
        from registry.lifecycle._common import apply_deferred_operations

        experiment_id = experiment.id
        transaction.on_commit(lambda: apply_deferred_operations(experiment_id))


def apply_trial_operation(experiment: Experiment, trial: Trial, op: TrialOperation) -> None:
    """Apply one operation to a locked trial of the locked experiment.

    ``ValidateAfter`` sets the trial's target length (ignored when not beyond what it already
    completed). A trial that already stopped COMPLETED (waiting, e.g. for an ASHA promotion) is
    resumed: ACTIVE with a new run that restores its latest checkpoint (PAUSED with no run in a
    paused experiment; left alone in a stopping one). A running trial trains on: the report
    that asked answers with the length, or its exit re-queues it (``_after_active_run``).
    ``Close`` marks the trial closed; one still training toward an operation is asked to
    checkpoint and stop (the preemption signal; its exit ends it COMPLETED). ``Stop`` does the
    same whatever its operations (time-based ASHA gives none).
    """
    if isinstance(op, ValidateAfter):
        if op.length <= trial.searcher_completed_length:
            return
        trial.searcher_length = op.length
        trial.searcher_closed = False
        fields = ["searcher_length", "searcher_closed"]
        if (
            trial.state == State.COMPLETED
            and not trial.early_exit
            and experiment.state in (State.ACTIVE, State.PAUSED)
        ):
            trial.state = experiment.state
            trial.ended_at = None
            trial.progress = trial.searcher_completed_length / op.length
            fields += ["state", "ended_at", "progress"]
        trial.save(update_fields=fields)
        if trial.state == State.ACTIVE and "state" in fields:
            schedule_run(trial)
        return
    trial.searcher_closed = True
    trial.save(update_fields=["searcher_closed"])
    if isinstance(op, Stop) or has_pending_operation(trial):
        TrialRun.objects.filter(
            trial=trial, run_id=trial.run_id, stop_requested=StopReason.NONE
        ).exclude(state__in=[RunState.EXITED, RunState.QUEUED]).update(
            stop_requested=StopReason.CLOSE
        )


def has_pending_operation(trial: Trial) -> bool:
    """Whether the searcher asked the trial to train further than it reported completing."""
    return (trial.searcher_length or 0) > trial.searcher_completed_length


def deliver_event(
    trial: Trial, event: Event, call: Callable[[SearchMethod], list[Operation]]
) -> None:
    """Deliver one searcher event about ``trial`` (locks its experiment; trial already locked):
    ``call`` the searcher when it asks for ``event`` (``SearchMethod.wants``), else nothing.

    Operations for ``trial`` itself change the given instance."""
    experiment = Experiment.objects.select_for_update(no_key=True).get(id=trial.experiment_id)
    searcher = searcher_for(experiment)
    if not searcher.wants(event):
        return
    apply_operations(experiment, searcher, call(searcher), in_hand=trial)


def deliver_trial_ended(trial: Trial, state: State) -> None:
    """Tell the searcher a trial ended: ``on_trial_closed`` for a COMPLETED trial that finished
    its operations (or was closed), ``on_trial_exited_early`` otherwise: with the reason it
    reported, ``errored`` for ERROR or a COMPLETED trial that left an operation unfinished,
    ``user_canceled`` for CANCELED."""
    request_id = trial.request_id
    if trial.early_exit:
        reason = trial.early_exit
    elif state == State.COMPLETED and (trial.searcher_closed or not has_pending_operation(trial)):
        deliver_event(trial, Event.TRIAL_CLOSED, lambda s: s.on_trial_closed(request_id))
        return
    elif state == State.CANCELED:
        reason = EarlyExitReason.USER_CANCELED
    else:
        reason = EarlyExitReason.ERRORED
    deliver_event(
        trial, Event.TRIAL_EXITED_EARLY, lambda s: s.on_trial_exited_early(request_id, reason)
    )
