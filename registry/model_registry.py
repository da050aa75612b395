"""The model registry's services: create, update, archive and delete models; register, update and
delete their versions (Determined's ``det model`` / MLflow's registered models).

Views (REST and dashboard) only call these functions. Rules, in one place:

- A model name is 1-256 characters of ``A-Z a-z 0-9 . _ -`` starting with a letter or digit
  (``MODEL_NAME_RE``), so it is a URL path segment as is (``/models/{name}/``), with no
  percent-encoding and never ``.`` or ``..``. Names are unique across the installation
  (case-sensitive), whatever the workspace: a taken name is a 409 even when hidden.
- A model lives in a workspace (``registry.authz``): without a role there it is unknown (404,
  absent from lists); any role reads it; editors create models there; its owner as an editor
  there, the workspace's admins and site admins change or delete it, its versions and aliases
  (``check_can_modify``, 403 otherwise); moving it needs those rights in both workspaces.
- Versions are numbered 1, 2, ... per model: the next number is the highest plus one, chosen while
  the model row is locked (``select_for_update``), so concurrent registrations never collide.
  Deleting the newest version frees its number (as in Determined).
- Registering a checkpoint needs the right to change its experiment (``check_can_register``)
  besides the model's: a version keeps its checkpoint from being deleted.
- Only a ``COMPLETED`` checkpoint can be registered; the checkpoint row is locked while the
  version is written, so a retention pass that locks it too cannot delete it meanwhile. Lock
  order: model, then checkpoint.
- A version holds its checkpoint (``ModelVersion.checkpoint`` is ``PROTECT``;
  ``checkpoint.model_versions`` lists the holders); deleting the version, or the whole model,
  frees it.
- An archived model accepts no new versions (409), as in Determined; unarchive it first.
- Descriptions, comments and labels follow ``registry.user_text`` (the rules of experiments'
  too): ``InvalidInput`` naming the field otherwise.
"""

from __future__ import annotations

import uuid as uuid_lib
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from registry.authz import (
    NotPermitted,
    can_change,
    ensure_can_create_model_in,
    ensure_can_move_model,
    ensure_readable,
    scoped,
)
from registry.errors import InvalidInput, RegistryError
from registry.model_names import MODEL_NAME_MAX as MODEL_NAME_MAX
from registry.model_names import MODEL_NAME_PATTERN as MODEL_NAME_PATTERN
from registry.model_names import clean_notes
from registry.model_names import validate_model_name as validate_model_name
from registry.model_names import with_label as with_label
from registry.models import (
    AliasAction,
    Checkpoint,
    CheckpointState,
    ModelAlias,
    ModelAliasEvent,
    ModelVersion,
    RegisteredModel,
)
from registry.workspaces import find_workspace


class ModelConflict(RegistryError):
    """409: a duplicate name, or a change the model's state refuses (archived)."""

    status = 409


class ModelNotFound(RegistryError):
    """404: no model of that name, or no such version."""

    status = 404


class ModelPermissionDenied(NotPermitted):
    """403: the user may read the model but neither owns it nor is staff."""

    status = 403


def check_can_modify(model: RegisteredModel, user: Any) -> None:
    """Raise unless ``user`` may change ``model`` (``registry.authz.can_change`` in its
    workspace: its owner as an editor there, the workspace's admins, site admins).

    Raises:
        registry.authz.Hidden: (404, worded as for an unknown model) no role in its workspace.
        ModelPermissionDenied: (403) otherwise.
    """
    ensure_readable(user, model.workspace_id, f"model named {model.name!r}")
    if can_change(user, model.owner_id, model.workspace_id):
        return
    raise ModelPermissionDenied(
        f"Only the owner of model {model.name!r} ({model.owner.get_username()}) as an editor of"
        " its workspace, or an admin of the workspace, may change it."
    )


def check_can_register(checkpoint: Checkpoint, user: Any) -> None:
    """Raise ``ModelPermissionDenied`` unless ``user`` may register ``checkpoint`` as a model
    version: who may change its experiment (``registry.authz.can_change``). Reads
    ``checkpoint.trial.experiment.owner`` and its project (join them to save the queries)."""
    experiment = checkpoint.trial.experiment
    if can_change(user, experiment.owner_id, experiment.project.workspace_id):
        return
    raise ModelPermissionDenied(
        f"Only the owner of experiment {experiment.id} ({experiment.owner.get_username()}) or an"
        f" admin may register its checkpoint {checkpoint.uuid} as a model version: a version"
        " keeps the checkpoint from being deleted."
    )


def get_model(name: str, *, user: Any) -> RegisteredModel:
    """The model named ``name`` (owner and workspace joined) if ``user`` has a role in its
    workspace.

    Raises:
        ModelNotFound: no such model, or one in a workspace where ``user`` has no role (the
            same answer: its existence is not disclosed).
    """
    models = scoped(RegisteredModel.objects.select_related("owner", "workspace"), user)
    model = models.filter(name=name).first()
    if model is None:
        raise ModelNotFound(f"No model named {name!r}.")
    return model


def get_version(model: RegisteredModel, version: int) -> ModelVersion:
    """Version ``version`` of ``model`` with its checkpoint (and trial) joined.

    Raises:
        ModelNotFound: the model has no such version.
    """
    found = (
        ModelVersion.objects.select_related("model__owner", "owner", "checkpoint__trial")
        .filter(model=model, version=version)
        .first()
    )
    if found is None:
        raise ModelNotFound(f"Model {model.name!r} has no version {version}.")
    return found


def model_create(
    *,
    owner: Any,
    name: str,
    workspace: int | str | None = None,
    description: str = "",
    labels: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> RegisteredModel:
    """Create model ``name`` owned by ``owner`` in ``workspace`` (an id or a name; None: the
    default workspace), as Determined's ``det model create``.

    Raises:
        InvalidInput: an invalid ``name``, description or labels; ``{"workspace": [...]}`` for
            an unknown, hidden or archived workspace (``registry.workspaces.find_workspace``).
        NotPermitted: (403) ``owner`` is not an editor of the workspace.
        ModelConflict: ``{"name": [...]}`` when the name is taken (in any workspace).
    """
    validate_model_name(name)
    cleaned = clean_notes(description=description, labels=list(labels or []))
    place = find_workspace(owner, workspace)
    ensure_can_create_model_in(owner, place)
    try:
        with transaction.atomic():
            return RegisteredModel.objects.create(
                name=name,
                description=cleaned["description"],
                labels=cleaned["labels"],
                metadata=dict(metadata or {}),
                owner=owner,
                workspace=place,
            )
    except IntegrityError:
        raise ModelConflict(
            f"A model named {name!r} already exists.",
            {"name": [f"A model named {name!r} already exists."]},
        ) from None


def model_update(
    *,
    model: RegisteredModel,
    user: Any,
    description: str | None = None,
    labels: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    archived: bool | None = None,
    workspace: int | str | None = None,
) -> RegisteredModel:
    """Replace the given fields of ``model`` (None leaves a field as it is); return it.

    ``metadata`` replaces the whole mapping, as ``labels`` replaces the whole list;
    ``workspace`` (an id or a name) moves the model there.

    Raises:
        ModelPermissionDenied: ``user`` may not change the model (``check_can_modify``).
        NotPermitted: moving into a workspace where ``user`` could not change it.
        InvalidInput: a description or labels against ``registry.user_text``'s rules;
            ``{"workspace": [...]}`` for an unknown, hidden or archived workspace.
    """
    check_can_modify(model, user)
    cleaned = clean_notes(description=description, labels=labels)
    if workspace is not None:
        target = find_workspace(user, workspace)
        ensure_can_move_model(user, model, target)
        model.workspace = target
    changes = {
        "description": cleaned.get("description"),
        "labels": cleaned.get("labels"),
        "metadata": metadata,
        "archived": archived,
    }
    fields = [key for key, value in changes.items() if value is not None]
    for key in fields:
        setattr(model, key, changes[key])
    model.updated_at = timezone.now()
    moved = ["workspace"] if workspace is not None else []
    model.save(update_fields=[*fields, *moved, "updated_at"])
    return model


def model_delete(*, model: RegisteredModel, user: Any) -> int:
    """Delete ``model`` and all its versions, freeing their checkpoints for retention (as
    Determined's ``det model delete``); return how many versions went with it.

    Raises:
        ModelPermissionDenied: ``user`` may not change the model (``check_can_modify``).
    """
    check_can_modify(model, user)
    with transaction.atomic():
        count, _ = ModelVersion.objects.filter(model=model).delete()
        model.delete()
    return count


def version_register(
    *,
    model: RegisteredModel,
    user: Any,
    checkpoint_uuid: uuid_lib.UUID,
    name: str = "",
    comment: str = "",
    labels: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> ModelVersion:
    """Register ``checkpoint_uuid`` as the next version of ``model`` (Determined's
    ``Model.register_version``); return the version, its checkpoint and trial joined.

    The user must be allowed to change both the model (``check_can_modify``: an editor of its
    workspace who owns it, or an admin there) and the checkpoint's experiment: the version
    protects the checkpoint from retention and deletion until the version or model is deleted.

    Raises:
        ModelPermissionDenied: ``user`` may not change the model or the checkpoint's
            experiment (``check_can_register``).
        ModelConflict: the model is archived.
        InvalidInput: ``{"checkpoint_uuid": [...]}`` for an unknown checkpoint or one that is
            not ``COMPLETED`` (being deleted or deleted).
    """
    check_can_modify(model, user)
    cleaned = clean_notes(comment=comment, labels=list(labels or []))
    with transaction.atomic():
        # The model row lock serialises registrations of this model: two of them cannot both
        # read the same highest version and insert the same next number.
        locked = RegisteredModel.objects.select_for_update(no_key=True).get(pk=model.pk)
        if locked.archived:
            raise ModelConflict(
                f"Model {model.name!r} is archived; unarchive it to register versions."
            )
        checkpoint = (
            # ``of=self``: lock the checkpoint row only, not the joined trial. A checkpoint in
            # a workspace where the user has no role is answered as unknown.
            scoped(Checkpoint.objects, user)
            .select_for_update(of=("self",), no_key=True)
            .select_related("trial__experiment__owner", "trial__experiment__project")
            .filter(uuid=checkpoint_uuid)
            .first()
        )
        if checkpoint is None:
            raise InvalidInput({"checkpoint_uuid": [f"No checkpoint {checkpoint_uuid}."]})
        check_can_register(checkpoint, user)
        if checkpoint.state != CheckpointState.COMPLETED:
            raise InvalidInput(
                {
                    "checkpoint_uuid": [
                        f"Checkpoint {checkpoint_uuid} is {checkpoint.state}; only COMPLETED"
                        " checkpoints can be registered."
                    ]
                }
            )
        highest = locked.versions.aggregate(top=Max("version"))["top"] or 0
        version = ModelVersion.objects.create(
            model=locked,
            version=highest + 1,
            checkpoint=checkpoint,
            name=name,
            comment=cleaned["comment"],
            labels=cleaned["labels"],
            metadata=dict(metadata or {}),
            owner=user,
        )
        locked.updated_at = timezone.now()
        locked.save(update_fields=["updated_at"])
    version.model = model
    return version


def version_update(
    *,
    version: ModelVersion,
    user: Any,
    name: str | None = None,
    comment: str | None = None,
    labels: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> ModelVersion:
    """Replace the given notes of ``version`` (None leaves a field as it is); return it.

    Raises:
        ModelPermissionDenied: ``user`` may not change the model (``check_can_modify``).
        InvalidInput: a comment or labels against ``registry.user_text``'s rules.
    """
    check_can_modify(version.model, user)
    cleaned = clean_notes(comment=comment, labels=labels)
    changes = {
        "name": name,
        "comment": cleaned.get("comment"),
        "labels": cleaned.get("labels"),
        "metadata": metadata,
    }
    fields = [key for key, value in changes.items() if value is not None]
    for key in fields:
        setattr(version, key, changes[key])
    if fields:
        version.save(update_fields=fields)
    return version


def lock_model(model_id: int) -> RegisteredModel | None:
    """The model row, locked until the transaction ends (``FOR NO KEY UPDATE``): it serialises
    a model's version deletions and alias changes (``registry.model_aliases``). None when the
    model is gone."""
    return RegisteredModel.objects.select_for_update(no_key=True).filter(pk=model_id).first()


def version_delete(*, version: ModelVersion, user: Any) -> None:
    """Delete ``version``; its checkpoint is no longer held by it (retention may then take it
    unless another version holds it too). The aliases pointing at it go with it (as in MLflow),
    each recorded as a ``VERSION_DELETED`` alias event (``registry.model_aliases``).

    Raises:
        ModelPermissionDenied: ``user`` may not change the model (``check_can_modify``).
    """
    check_can_modify(version.model, user)
    with transaction.atomic():
        # The model row lock serialises this with alias moves onto the version.
        lock_model(version.model_id)
        dropped = list(ModelAlias.objects.filter(version=version).values_list("alias", flat=True))
        ModelAliasEvent.objects.bulk_create(
            ModelAliasEvent(
                model_id=version.model_id,
                alias=alias,
                action=AliasAction.VERSION_DELETED,
                from_version=version.version,
                to_version=None,
                user=user,
            )
            for alias in dropped
        )
        version.delete()
