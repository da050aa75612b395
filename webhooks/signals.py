"""Where events come from: the registry's own model signals (``post_init``, ``pre_save``,
``post_save``), so the registry never imports webhooks and every path that saves the row
(lifecycle, API, dashboard, MLflow adapter) emits the same event from one place.

- ``experiment.state_changed`` / ``trial.state_changed``: a saved ``Experiment`` / ``Trial``
  whose ``state`` differs from the one it was loaded with (confirmed against the stored row
  before the write, inside the writer's transaction); creating one is not a change.
- ``checkpoint.completed``: a ``Checkpoint`` created COMPLETED (its registration).
- ``model_version.created``: a ``ModelVersion`` created.
- ``model_alias.moved``: a ``ModelAliasEvent`` created with action SET or MOVE.

Each handler runs in the transaction of the save, so its deliveries commit with the change.
An event goes to the webhooks without a workspace filter and to those filtered to its
workspace: the experiment's project's workspace for experiment, trial and
checkpoint events (``_experiment_workspace``), the model's for model version and alias
events.
Writes through ``QuerySet.update()`` send no signal, so the registry changes a state by
``save()`` everywhere.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_init, post_save, pre_save

from registry.models import (
    AliasAction,
    Checkpoint,
    CheckpointState,
    Experiment,
    ModelAliasEvent,
    ModelVersion,
    Trial,
)
from webhooks.events import record
from webhooks.models import EventType
from webhooks.payloads import dashboard_url

# Attribute holding the state an Experiment/Trial instance was loaded (or last saved) with.
_LOADED = "_webhooks_loaded_state"
# Attribute holding the state the stored row had just before this save (pre_save).
_BEFORE = "_webhooks_state_before"


def _experiment_workspace(experiment_id: int) -> int | None:
    """The id of the workspace of experiment ``experiment_id`` (its project's; one query): where
    an experiment, trial or checkpoint event belongs for webhooks' workspace filter."""
    experiments = Experiment.objects.filter(id=experiment_id)
    return experiments.values_list("project__workspace_id", flat=True).first()


def _remember(sender: Any, instance: Any, **kwargs: Any) -> None:
    # __dict__, not the attribute: a deferred field must not cost a query per loaded row.
    instance.__dict__[_LOADED] = instance.__dict__.get("state")


def _before_save(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    instance.__dict__.pop(_BEFORE, None)
    if instance._state.adding or (update_fields is not None and "state" not in update_fields):
        return
    loaded, state = instance.__dict__.get(_LOADED), instance.__dict__.get("state")
    if state is None or loaded == state:
        return
    # The instance may be stale (refresh_from_db does not re-run post_init): the stored row,
    # locked by the writer's transaction in the lifecycle, says what the change really is.
    before = sender.objects.filter(pk=instance.pk).values_list("state", flat=True).first()
    if before is not None and before != state:
        instance.__dict__[_BEFORE] = before


def _experiment_saved(sender: Any, instance: Experiment, created: bool, **kwargs: Any) -> None:
    before = instance.__dict__.pop(_BEFORE, None)
    instance.__dict__[_LOADED] = instance.__dict__.get("state")
    if before is None or created:
        return
    record(
        EventType.EXPERIMENT_STATE_CHANGED,
        {
            "experiment": {
                "id": instance.pk,
                "name": instance.name,
                "owner": instance.owner.username,
            },
            "previous_state": str(before),
            "state": str(instance.state),
            "url": dashboard_url("experiment", instance.pk),
        },
        workspace=lambda: _experiment_workspace(instance.pk),
    )


def _trial_saved(sender: Any, instance: Trial, created: bool, **kwargs: Any) -> None:
    before = instance.__dict__.pop(_BEFORE, None)
    instance.__dict__[_LOADED] = instance.__dict__.get("state")
    if before is None or created:
        return
    record(
        EventType.TRIAL_STATE_CHANGED,
        {
            "trial": {"id": instance.pk, "experiment_id": instance.experiment_id},
            "previous_state": str(before),
            "state": str(instance.state),
            "url": dashboard_url("trial", instance.pk),
        },
        workspace=lambda: _experiment_workspace(instance.experiment_id),
    )


def _checkpoint_saved(sender: Any, instance: Checkpoint, created: bool, **kwargs: Any) -> None:
    if not created or instance.state != CheckpointState.COMPLETED:
        return
    trial = instance.trial
    record(
        EventType.CHECKPOINT_COMPLETED,
        {
            "checkpoint": {
                "uuid": str(instance.uuid),
                "trial_id": trial.pk,
                "experiment_id": trial.experiment_id,
                "steps_completed": instance.steps_completed,
                "size": instance.size,
            },
            "url": dashboard_url("trial", trial.pk),
        },
        workspace=lambda: _experiment_workspace(trial.experiment_id),
    )


def _version_saved(sender: Any, instance: ModelVersion, created: bool, **kwargs: Any) -> None:
    if not created:
        return
    model = instance.model
    record(
        EventType.MODEL_VERSION_CREATED,
        {
            "model": model.name,
            "version": instance.version,
            "checkpoint_uuid": str(instance.checkpoint_id),
            "url": dashboard_url("model", model.name),
        },
        workspace=lambda: model.workspace_id,
    )


def _alias_event_saved(
    sender: Any, instance: ModelAliasEvent, created: bool, **kwargs: Any
) -> None:
    if not created or instance.action not in (AliasAction.SET, AliasAction.MOVE):
        return
    model = instance.model
    record(
        EventType.MODEL_ALIAS_MOVED,
        {
            "model": model.name,
            "alias": instance.alias,
            "action": str(instance.action),
            "from_version": instance.from_version,
            "to_version": instance.to_version,
            "url": dashboard_url("model", model.name),
        },
        workspace=lambda: model.workspace_id,
    )


def connect() -> None:
    """Connect the handlers (``WebhooksConfig.ready``); ``dispatch_uid`` keeps it once."""
    for model in (Experiment, Trial):
        post_init.connect(_remember, sender=model, dispatch_uid=f"webhooks-init-{model.__name__}")
        pre_save.connect(_before_save, sender=model, dispatch_uid=f"webhooks-pre-{model.__name__}")
    post_save.connect(_experiment_saved, sender=Experiment, dispatch_uid="webhooks-experiment")
    post_save.connect(_trial_saved, sender=Trial, dispatch_uid="webhooks-trial")
    post_save.connect(_checkpoint_saved, sender=Checkpoint, dispatch_uid="webhooks-checkpoint")
    post_save.connect(_version_saved, sender=ModelVersion, dispatch_uid="webhooks-version")
    post_save.connect(_alias_event_saved, sender=ModelAliasEvent, dispatch_uid="webhooks-alias")
