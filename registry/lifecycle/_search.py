"""The registry's side of the searcher: deliver events, carry out the operations they return.

Each event runs with the experiment row locked and saves the searcher's state in the same
transaction as the change that caused it, so a restarted server resumes the search exactly
(Determined's searcher events; ``registry/searcher/``).
"""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Callable

from headway.expconf import parse_experiment_config
from registry.models import Experiment, State, Trial
from registry.scheduler import schedule_run
from registry.searcher import Create, Operation, SearchMethod, Shutdown, build_searcher


def searcher_for(experiment: Experiment) -> SearchMethod:
    """The experiment's search method with its saved state loaded."""
    config = parse_experiment_config(experiment.config)
    searcher = build_searcher(config, experiment.config["reproducibility"]["experiment_seed"])
    searcher.load_state_dict(experiment.searcher_state)
    return searcher


def apply_operations(
    experiment: Experiment,
    searcher: SearchMethod,
    operations: list[Operation],
    warm_start: uuid_lib.UUID | None = None,
) -> None:
    """Carry out operations and save the searcher's state; the caller holds the experiment lock.

    ``Create`` makes a trial and queues its first run, then delivers ``on_trial_created``. Every
    trial of an experiment warm-starts from the same checkpoint: ``warm_start`` at creation,
    later the one its first trial got. In a PAUSED experiment the trial is created PAUSED with
    no run (activating the experiment queues it); a stopping or ended experiment creates no
    more trials (Determined ignores the searcher's operations then). ``Shutdown`` marks the
    search as over.
    """
    pending = list(operations)
    shutdown = bool(experiment.searcher_state.get("shutdown"))
    creates = experiment.state in (State.ACTIVE, State.PAUSED)
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
            if trial.state == State.ACTIVE:
                schedule_run(trial)
            pending.extend(searcher.on_trial_created(op.request_id))
        elif isinstance(op, Shutdown):
            shutdown = True
    experiment.searcher_state = {**searcher.state_dict(), "shutdown": shutdown}
    experiment.save(update_fields=["searcher_state"])


def deliver_event(trial: Trial, event: Callable[[SearchMethod], list[Operation]]) -> None:
    """Deliver one searcher event about ``trial`` (locks its experiment; trial already locked)."""
    experiment = Experiment.objects.select_for_update().get(id=trial.experiment_id)
    searcher = searcher_for(experiment)
    apply_operations(experiment, searcher, event(searcher))


def deliver_trial_ended(trial: Trial, state: State) -> None:
    """``on_trial_closed`` for a COMPLETED trial, ``on_trial_exited_early`` otherwise."""
    if state == State.COMPLETED:
        deliver_event(trial, lambda s: s.on_trial_closed(trial.request_id))
    else:
        reason = "errored" if state == State.ERROR else "user_canceled"
        deliver_event(trial, lambda s: s.on_trial_exited_early(trial.request_id, reason))
