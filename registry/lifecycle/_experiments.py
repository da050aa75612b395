"""Creating experiments and the experiment-wide controls (pause, activate, cancel, kill, archive)."""

from __future__ import annotations

import json
import random
import uuid as uuid_lib
from typing import Any

from django.conf import settings
from django.db import transaction

from headway.archive import (
    EntrypointNotFound,
    ModelDefinitionError,
    ModelDefinitionTooLarge,
    check_model_definition_isolated,
)
from headway.expconf import ConfigError, ExperimentConfig, parse_experiment_config
from registry.authz import scoped
from registry.errors import InvalidInput, PayloadTooLarge
from registry.jsonsafe import json_storage_problem
from registry.lifecycle._common import refresh_experiment
from registry.lifecycle._search import apply_operations
from registry.lifecycle._transitions import EXPERIMENT_CONTROLS, check_control
from registry.lifecycle._trials import (
    trial_activate_locked,
    trial_cancel_locked,
    trial_kill_locked,
    trial_pause_locked,
)
from registry.models import TERMINAL_STATES, Checkpoint, CheckpointState, Experiment, State, Trial
from registry.pools import check_resource_pool
from registry.searcher import build_searcher
from registry.storage_endpoints import check_storage_endpoint
from registry.storage_locations import resolve_storage
from registry.workspaces import resolve_config_project


def _complete_config(config: ExperimentConfig, storage: dict[str, Any]) -> ExperimentConfig:
    """Fill server-side defaults: the resolved checkpoint storage (``resolve_storage``) and a
    random experiment seed."""
    data = config.to_dict()
    data["checkpoint_storage"] = storage
    repro = data.get("reproducibility") or {}
    if repro.get("experiment_seed") is None:
        repro["experiment_seed"] = random.SystemRandom().randrange(2**31)
    data["reproducibility"] = repro
    return parse_experiment_config(data)


def parse_config_or_400(source: dict[str, Any] | str) -> ExperimentConfig:
    """Validate a config; raise ``InvalidInput`` with ``config.<field>`` keys on error.

    The YAML text, and the JSON of a config given as a mapping, may be at most
    ``HEADWAY_MAX_CONFIG_BYTES`` long (so is the normalised config that is stored); YAML aliases
    are bounded by ``headway.expconf.MAX_YAML_VALUES``. Values PostgreSQL cannot store (NUL
    characters, from JSON or a YAML ``"\\0"`` escape) are refused naming ``config``.
    """
    limit = settings.HEADWAY_MAX_CONFIG_BYTES
    size = len(source.encode() if isinstance(source, str) else json.dumps(source).encode())
    if size > limit:
        raise InvalidInput(
            {"config": [f"The config is {size} bytes, over the {limit}-byte limit."]}
        )
    try:
        config = parse_experiment_config(source)
    except ConfigError as exc:
        errors = {(k if k == "config" else f"config.{k}"): list(v) for k, v in exc.errors.items()}
        raise InvalidInput(errors or {"config": [str(exc)]}) from None
    data = config.to_dict()
    problem = json_storage_problem(data)
    if problem is not None:
        raise InvalidInput({"config": [problem]})
    size = len(json.dumps(data).encode())
    if size > limit:
        raise InvalidInput(
            {"config": [f"The normalised config is {size} bytes, over the {limit}-byte limit."]}
        )
    return config


def experiment_create(
    *,
    owner,
    config_source: dict[str, Any] | str,
    model_definition: bytes,
    source_trial: Trial | None = None,
    warm_start_checkpoint: uuid_lib.UUID | None = None,
) -> Experiment:
    """Validate config and model definition, store the experiment, create its first trials.

    Nothing is stored unless every check passes; trial runs are enqueued after commit.

    Arguments:
        source_trial, warm_start_checkpoint: set by "continue trial": the new trials start from
            that checkpoint's weights (docs/lifecycle.md).

    Raises:
        InvalidInput: bad config (``config.<field>``; an unknown or archived
            ``config.workspace`` / ``config.project`` too), unsafe archive (``model_definition``) or
            missing entrypoint module/class (``config.entrypoint``).
        PayloadTooLarge: the archive is over ``HEADWAY_MAX_MODEL_DEF_BYTES`` packed, or four
            times that unpacked.
    """
    config = parse_config_or_400(config_source)
    # Its workspace and project (both or neither: the default project): 400 naming the field.
    project = resolve_config_project(user=owner, workspace=config.workspace, project=config.project)
    check_storage_endpoint(config.to_dict().get("checkpoint_storage"))  # SSRF: allow-list only
    # Only the admin's storage locations: a 400 naming the field otherwise.
    storage = resolve_storage(config.to_dict().get("checkpoint_storage"))
    check_resource_pool(config.resources.resource_pool)  # the admin's pools: 400 naming it
    # The rules (and the messages) are headway.archive's, shared with the CLI's packer.
    try:
        check_model_definition_isolated(  # bounded time and memory, off the request thread
            model_definition,
            max_bytes=settings.HEADWAY_MAX_MODEL_DEF_BYTES,
            entrypoint_class=config.entrypoint_trial_class,
            timeout=settings.HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS,
            memory_bytes=settings.HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES,
        )
    except ModelDefinitionTooLarge as exc:
        raise PayloadTooLarge(str(exc), {"model_definition": [str(exc)]}) from None
    except EntrypointNotFound as exc:
        raise InvalidInput({"config.entrypoint": [str(exc)]}) from None
    except ModelDefinitionError as exc:
        raise InvalidInput({"model_definition": [str(exc)]}) from None
    config = _complete_config(config, storage)
    data = config.to_dict()
    if warm_start_checkpoint is None:
        warm_start_checkpoint = _configured_warm_start(config, owner)
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
            project=project,
        )
        searcher = build_searcher(config, data["reproducibility"]["experiment_seed"])
        apply_operations(experiment, searcher, searcher.initial_operations(), warm_start_checkpoint)
    return experiment


def _configured_warm_start(config: ExperimentConfig, owner: Any) -> uuid_lib.UUID | None:
    """The checkpoint named by ``searcher.source_checkpoint_uuid`` / ``source_trial_id``, among
    those ``owner`` may read (``registry.authz.scoped``: its weights are a read).

    Raises:
        InvalidInput: naming the field when the checkpoint or trial (or its checkpoint) is missing
            or in a workspace where ``owner`` has no role.
    """
    searcher = config.searcher
    if searcher.source_checkpoint_uuid:
        field = "config.searcher.source_checkpoint_uuid"
        try:
            wanted = uuid_lib.UUID(str(searcher.source_checkpoint_uuid))
        except ValueError:
            raise InvalidInput({field: ["Not a checkpoint uuid."]}) from None
        found = scoped(Checkpoint.objects.filter(uuid=wanted), owner)
        state = found.values_list("state", flat=True).first()
        if state is None:
            raise InvalidInput({field: [f"No checkpoint {wanted}."]})
        if state != CheckpointState.COMPLETED:
            raise InvalidInput({field: [f"Checkpoint {wanted} is {state}: its files are deleted."]})
        return wanted
    if searcher.source_trial_id:
        field = "config.searcher.source_trial_id"
        trial = scoped(Trial.objects.filter(id=searcher.source_trial_id), owner).first()
        if trial is None:
            raise InvalidInput({field: [f"No trial {searcher.source_trial_id}."]})
        if trial.latest_checkpoint is None:
            raise InvalidInput({field: [f"Trial {trial.id} has no checkpoint to start from."]})
        return trial.latest_checkpoint
    return None


def _lock_experiment_trials(experiment_id: int) -> tuple[Experiment, list[Trial]]:
    # Trials first, then the experiment: the same order as trial transitions (no deadlock).
    # of=self: the join with the experiment must not lock it along with the first trial.
    trials = list(
        Trial.objects.select_for_update(of=("self",), no_key=True)
        .select_related("experiment")
        .filter(experiment_id=experiment_id)
        .order_by("id")
    )
    experiment = Experiment.objects.select_for_update(no_key=True).get(id=experiment_id)
    return experiment, trials


def _acts(experiment: Experiment, control: str) -> bool:
    return check_control(
        EXPERIMENT_CONTROLS, control, f"experiment {experiment.id}", experiment.state
    )


def _toggle(
    experiment_id: int, source: State, target: State, control: str, toggle_trial
) -> Experiment:
    with transaction.atomic():
        experiment, trials = _lock_experiment_trials(experiment_id)
        if not _acts(experiment, control):
            return experiment
        for trial in trials:
            if trial.state == source:
                toggle_trial(trial)
        experiment.state = target
        experiment.save(update_fields=["state"])
        return refresh_experiment(experiment_id)


def experiment_pause(*, experiment_id: int) -> Experiment:
    """Pause every running trial (each checkpoints and stops); PAUSED → no-op.

    Raises:
        IllegalTransition: the experiment has ended or is stopping.
    """
    return _toggle(experiment_id, State.ACTIVE, State.PAUSED, "pause", trial_pause_locked)


def experiment_activate(*, experiment_id: int) -> Experiment:
    """Resume every paused trial from its latest checkpoint; ACTIVE → no-op.

    Raises:
        IllegalTransition: the experiment has ended or is stopping.
    """
    return _toggle(experiment_id, State.PAUSED, State.ACTIVE, "activate", trial_activate_locked)


def _stop(experiment_id: int, stopping: State, control: str, stop_trial) -> Experiment:
    with transaction.atomic():
        experiment, trials = _lock_experiment_trials(experiment_id)
        if not _acts(experiment, control):
            return experiment
        experiment.state = stopping
        experiment.save(update_fields=["state"])
        for trial in trials:
            if trial.state not in TERMINAL_STATES:
                stop_trial(trial)
        return refresh_experiment(experiment_id)


def experiment_cancel(*, experiment_id: int) -> Experiment:
    """Stop every trial gracefully with a checkpoint; the experiment ends CANCELED."""
    return _stop(experiment_id, State.STOPPING_CANCELED, "cancel", trial_cancel_locked)


def experiment_kill(*, experiment_id: int) -> Experiment:
    """Terminate every trial's process now; the experiment ends CANCELED."""
    return _stop(experiment_id, State.STOPPING_KILLED, "kill", trial_kill_locked)


def _set_archived(experiment_id: int, archived: bool) -> Experiment:
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update(no_key=True).get(id=experiment_id)
        if archived:
            _acts(experiment, "archive")
        experiment.archived = archived
        experiment.save(update_fields=["archived"])
        return experiment


def experiment_archive(*, experiment_id: int) -> Experiment:
    """Hide an ended experiment from default lists."""
    return _set_archived(experiment_id, True)


def experiment_unarchive(*, experiment_id: int) -> Experiment:
    """Show an archived experiment again."""
    return _set_archived(experiment_id, False)
