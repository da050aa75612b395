"""Every state change of experiments, trials, runs and checkpoints happens here.

Views, the REST API, workers and management commands call these functions; none of them writes
a state field itself. Each transition locks the rows it changes (``select_for_update``) or uses a
conditional UPDATE, so a double click, a retried task or a racing worker cannot corrupt state.
Semantics follow Determined (docs/lifecycle.md).
"""

from __future__ import annotations

import logging
import random
import uuid as uuid_lib
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from headway.config import ConfigError, ExperimentConfig, parse_experiment_config
from registry.errors import InvalidInput, PayloadTooLarge
from registry.model_definition import ModelDefinitionError, validate_model_definition
from registry.models import (
    TERMINAL_STATES,
    Checkpoint,
    Experiment,
    RunState,
    State,
    Trial,
    TrialRun,
)
from registry.scheduler import schedule_run
from registry.searcher import Close, Create, Operation, Shutdown, ValidateAfter, build_searcher

logger = logging.getLogger("headway.lifecycle")


# Experiments -------------------------------------------------------------------------------


def _complete_config(config: ExperimentConfig) -> ExperimentConfig:
    """Fill server-side defaults: the checkpoint folder and a random experiment seed."""
    data = config.to_dict()
    storage = data.get("checkpoint_storage") or {"type": "shared_fs"}
    data["checkpoint_storage"] = storage
    if storage.get("type") == "shared_fs" and not storage.get("host_path"):
        storage["host_path"] = str(settings.HEADWAY_CHECKPOINT_DIR)
    repro = data.get("reproducibility") or {}
    if repro.get("experiment_seed") is None:
        repro["experiment_seed"] = random.SystemRandom().randrange(2**31)
    data["reproducibility"] = repro
    return parse_experiment_config(data)


def parse_config_or_400(source: dict[str, Any] | str) -> ExperimentConfig:
    """Validate a config; raise ``InvalidInput`` with ``config.<field>`` keys on error."""
    try:
        return parse_experiment_config(source)
    except ConfigError as exc:
        errors = {
            (k if k == "config" else f"config.{k}"): list(v) for k, v in exc.errors.items()
        }
        raise InvalidInput(errors or {"config": [str(exc)]}) from None


def experiment_create(
    *, owner, config_source: dict[str, Any] | str, model_definition: bytes, source_trial=None
) -> Experiment:
    """Validate config and model definition, store the experiment, create its first trials.

    Nothing is stored unless every check passes.

    Raises:
        InvalidInput: bad config (``config.<field>``), unsafe archive (``model_definition``) or
            missing entrypoint module/class (``config.entrypoint``).
        PayloadTooLarge: the archive is over ``HEADWAY_MAX_MODEL_DEF_BYTES``.
    """
    config = parse_config_or_400(config_source)
    limit = settings.HEADWAY_MAX_MODEL_DEF_BYTES
    if len(model_definition) > limit:
        raise PayloadTooLarge(
            f"model_definition is {len(model_definition)} bytes; the limit is {limit} bytes",
            {"model_definition": [f"Over the {limit}-byte limit."]},
        )
    try:
        validate_model_definition(
            model_definition, max_bytes=limit, entrypoint_class=config.entrypoint_trial_class
        )
    except ModelDefinitionError as exc:
        field = "config.entrypoint" if exc.field == "entrypoint" else exc.field
        raise InvalidInput({field: [str(exc)]}) from None
    config = _complete_config(config)
    data = config.to_dict()
    with transaction.atomic():
        experiment = Experiment.objects.create(
            owner=owner,
            name=config.name,
            description=config.description,
            labels=list(config.labels),
            config=data,
            original_config=config_source if isinstance(config_source, str) else "",
            model_definition=model_definition,
            model_definition_size=len(model_definition),
            source_trial=source_trial,
        )
        searcher = build_searcher(config, data["reproducibility"]["experiment_seed"])
        _apply_operations(experiment, searcher, searcher.initial_operations())
    return experiment


def _apply_operations(experiment: Experiment, searcher, operations: list[Operation]) -> None:
    """Carry out searcher operations; the caller holds the experiment in a transaction."""
    pending = list(operations)
    while pending:
        op = pending.pop(0)
        if isinstance(op, Create):
            trial = Trial.objects.create(
                experiment=experiment, request_id=op.request_id, hparams=op.hparams, seed=op.seed
            )
            schedule_run(trial)
            pending.extend(searcher.on_trial_created(op.request_id))
        elif isinstance(op, ValidateAfter | Close):
            # Trials train to the configured max_length and close themselves for now.
            continue
        elif isinstance(op, Shutdown):
            experiment.searcher_state = {**searcher.state_dict(), "shutdown": True}
    experiment.searcher_state = {
        **searcher.state_dict(),
        "shutdown": experiment.searcher_state.get("shutdown", False),
    }
    experiment.save(update_fields=["searcher_state"])


def _refresh_experiment(experiment: Experiment) -> None:
    """Derive the experiment's progress and, once every trial ended, its final state."""
    trials = list(experiment.trials.values_list("state", "progress"))
    if trials:
        experiment.progress = sum(p for _, p in trials) / len(trials)
    fields = ["progress"]
    states = {s for s, _ in trials}
    if trials and states <= TERMINAL_STATES and not experiment.is_terminal:
        if State.COMPLETED in states:
            experiment.state = State.COMPLETED
        elif states == {State.CANCELED}:
            experiment.state = State.CANCELED
        else:
            experiment.state = State.ERROR
        experiment.ended_at = timezone.now()
        fields += ["state", "ended_at"]
    experiment.save(update_fields=fields)


# Trial runs --------------------------------------------------------------------------------


def trial_run_claim(*, trial_id: int, run_id: int, worker: str) -> TrialRun | None:
    """Claim a queued run for ``worker``; None when it was already claimed or is stale.

    A conditional UPDATE makes redelivered or duplicated tasks harmless: only one claimer sees
    a row change.
    """
    claimed = TrialRun.objects.filter(
        trial_id=trial_id, run_id=run_id, state=RunState.QUEUED, trial__state=State.ACTIVE
    ).update(state=RunState.STARTING, worker=worker, started_at=timezone.now())
    if claimed != 1:
        return None
    return TrialRun.objects.select_related("trial__experiment").get(trial_id=trial_id, run_id=run_id)


def trial_run_running(*, trial_id: int, run_id: int) -> None:
    """Mark a claimed run as RUNNING (its process started)."""
    TrialRun.objects.filter(trial_id=trial_id, run_id=run_id, state=RunState.STARTING).update(
        state=RunState.RUNNING, heartbeat_at=timezone.now()
    )


def trial_run_heartbeat(*, trial_id: int, run_id: int) -> None:
    """Record that the worker running this run is alive."""
    TrialRun.objects.filter(trial_id=trial_id, run_id=run_id).exclude(
        state=RunState.EXITED
    ).update(heartbeat_at=timezone.now())


def trial_run_exited(*, trial_id: int, run_id: int, exit_code: int) -> Trial:
    """Record a run's exit and decide what the trial does next.

    Exit 0 completes the trial. A failure restarts it from its latest checkpoint (a new run)
    while ``restarts < max_restarts``; after that the trial is ERROR. A report for a run that
    already exited (a retried task) changes nothing.
    """
    with transaction.atomic():
        trial = Trial.objects.select_for_update().select_related("experiment").get(id=trial_id)
        updated = TrialRun.objects.filter(trial_id=trial_id, run_id=run_id).exclude(
            state=RunState.EXITED
        ).update(state=RunState.EXITED, exit_code=exit_code, ended_at=timezone.now())
        if not updated or trial.is_terminal:
            return trial
        experiment = trial.experiment
        if exit_code == 0:
            _trial_end(trial, State.COMPLETED)
        elif trial.restarts < experiment.config.get("max_restarts", 5):
            trial.restarts += 1
            trial.save(update_fields=["restarts"])
            logger.warning(
                "trial %s run %s exited with %s; restart %s", trial.id, run_id, exit_code, trial.restarts
            )
            schedule_run(trial)
        else:
            _trial_end(trial, State.ERROR)
        _refresh_experiment(Experiment.objects.select_for_update().get(id=experiment.id))
    return trial


def _trial_end(trial: Trial, state: State) -> None:
    trial.state = state
    trial.ended_at = timezone.now()
    if state == State.COMPLETED:
        trial.progress = 1.0
    trial.save(update_fields=["state", "ended_at", "progress"])


def trial_report_progress(*, trial_id: int, progress: float) -> None:
    """Store a trial's training progress in [0, 1] (clamped) and refresh its experiment's."""
    progress = min(max(float(progress), 0.0), 1.0)
    with transaction.atomic():
        Trial.objects.filter(id=trial_id).update(progress=progress)
        trial = Trial.objects.get(id=trial_id)
        _refresh_experiment(Experiment.objects.select_for_update().get(id=trial.experiment_id))


def trial_searcher_completed(*, trial_id: int, length: int, metric: float) -> None:
    """Record the searcher metric a trial reported for its completed operation."""
    Trial.objects.filter(id=trial_id).update(searcher_metric_reported=metric)


# Checkpoints -------------------------------------------------------------------------------


def checkpoint_register(
    *,
    trial_id: int,
    uuid: uuid_lib.UUID,
    steps_completed: int,
    run_id: int | None,
    resources: dict[str, int],
    metadata: dict[str, Any],
) -> tuple[Checkpoint, bool]:
    """Register a checkpoint whose files are already in storage; idempotent on ``uuid``.

    Returns ``(checkpoint, created)``. The trial's ``latest_checkpoint`` follows the checkpoint
    with the most ``steps_completed``.

    Raises:
        InvalidInput: when ``uuid`` is already registered for another trial.
    """
    with transaction.atomic():
        trial = Trial.objects.select_for_update().select_related("experiment").get(id=trial_id)
        existing = Checkpoint.objects.filter(uuid=uuid).first()
        if existing is not None:
            if existing.trial_id != trial_id:
                raise InvalidInput({"uuid": ["Already registered for another trial."]})
            return existing, False
        checkpoint = Checkpoint.objects.create(
            uuid=uuid,
            trial=trial,
            run_id=run_id if run_id is not None else trial.run_id,
            steps_completed=steps_completed,
            resources=resources,
            metadata=metadata,
            size=sum(resources.values()),
            storage=trial.experiment.config.get("checkpoint_storage", {}),
        )
        latest = trial.checkpoints.order_by("-steps_completed", "-created_at").first()
        trial.latest_checkpoint = latest.uuid if latest else None
        trial.save(update_fields=["latest_checkpoint"])
    return checkpoint, True
