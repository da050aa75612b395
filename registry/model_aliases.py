"""Model aliases: named pointers at one version of a model (MLflow's ``@champion``, W&B's
aliases); ``models/{name}@{alias}/`` answers the version an alias points at.

Rules, in one place (views and the CLI only call these functions):

- An alias name is 1-64 characters of ``A-Z a-z 0-9 _ -`` starting with a letter
  (``ALIAS_RE``), so it is never all digits and cannot be read as a version number. Names are
  case-sensitive and unique per model. ``latest`` and ``history`` (any case) are reserved:
  ``NAME@latest`` always resolves to the model's newest version, and ``aliases/history/`` is the
  history route.
- Setting, moving and deleting aliases need the right to change the model (its owner or an
  admin, ``check_can_modify``: 403), the same as registering a version; everyone logged in (and
  trial tokens) may read and resolve them. Aliases of an archived model can still move (an
  archived model only refuses new versions).
- Every change writes one ``ModelAliasEvent`` in the same transaction: SET (new alias), MOVE
  (another version), DELETE, and VERSION_DELETED when deleting the version the alias points at
  deletes the alias with it (as MLflow does). Setting an alias to the version it already points
  at changes nothing and records nothing (an idempotent PUT).
- Changes of one model's aliases and versions are serialised by the model row's lock (the lock
  ``version_register`` takes), so a move never lands on a version being deleted.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from registry.errors import InvalidInput
from registry.model_registry import ModelNotFound, check_can_modify, get_version, lock_model
from registry.models import (
    AliasAction,
    ModelAlias,
    ModelAliasEvent,
    ModelVersion,
    RegisteredModel,
)

ALIAS_MAX = 64
ALIAS_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
# The same rule for URL patterns (the alias routes, ``models/{name}@{alias}/``).
ALIAS_PATTERN = ALIAS_RE.pattern
LATEST = "latest"
RESERVED = frozenset({LATEST, "history"})


def validate_alias_name(alias: Any) -> str:
    """``alias`` when it is a valid alias name (see the module docstring).

    Raises:
        InvalidInput: ``{"alias": [why]}``.
    """
    if not isinstance(alias, str) or not alias:
        raise InvalidInput({"alias": ["Must be a non-empty string."]})
    if len(alias) > ALIAS_MAX:
        raise InvalidInput({"alias": [f"Must be at most {ALIAS_MAX} characters."]})
    if not ALIAS_RE.fullmatch(alias):
        raise InvalidInput(
            {"alias": ["Use letters, digits, '_' and '-' only, starting with a letter."]}
        )
    if alias.lower() in RESERVED:
        raise InvalidInput({"alias": [f"{alias!r} is reserved ({LATEST}: the newest version)."]})
    return alias


def aliases_of(model: RegisteredModel) -> QuerySet[ModelAlias]:
    """The model's aliases by name, each with its version (and its ``set_by`` user) joined."""
    return (
        ModelAlias.objects.filter(model=model).select_related("version", "set_by").order_by("alias")
    )


def alias_history(model: RegisteredModel) -> QuerySet[ModelAliasEvent]:
    """The model's alias events, newest first, with their users joined."""
    return ModelAliasEvent.objects.filter(model=model).select_related("user").order_by("-id")


def _no_such_alias(model: RegisteredModel, alias: str) -> ModelNotFound:
    detail = f"Model {model.name!r} has no alias {alias!r}."
    return ModelNotFound(detail, {"alias": [detail]})


def _could_exist(alias: str) -> bool:
    # A name no alias can have is answered without a query: PostgreSQL refuses some text
    # (NUL characters) outright, which would be a 500 instead of the 404 it is.
    return len(alias) <= ALIAS_MAX and ALIAS_RE.fullmatch(alias) is not None


def find_alias(model: RegisteredModel, alias: str) -> ModelAlias:
    """Alias ``alias`` of ``model``, its version and ``set_by`` joined.

    Raises:
        ModelNotFound: ``{"alias": [...]}`` when the model has no such alias.
    """
    found = aliases_of(model).filter(alias=alias).first() if _could_exist(alias) else None
    if found is None:
        raise _no_such_alias(model, alias)
    return found


def resolve_alias(model: RegisteredModel, alias: str) -> ModelVersion:
    """The version ``alias`` points at, joined as ``get_version`` joins it; ``latest`` is the
    newest version.

    Raises:
        ModelNotFound: ``{"alias": [...]}`` for an alias the model does not have (or ``latest``
            of a model without versions).
    """
    if not _could_exist(alias):
        raise _no_such_alias(model, alias)
    if alias.lower() == LATEST:
        number = (
            ModelVersion.objects.filter(model=model)
            .order_by("-version")
            .values_list("version", flat=True)
            .first()
        )
        if number is None:
            detail = f"Model {model.name!r} has no versions."
            raise ModelNotFound(detail, {"alias": [detail]})
    else:
        number = (
            ModelAlias.objects.filter(model=model, alias=alias)
            .values_list("version__version", flat=True)
            .first()
        )
        if number is None:
            raise _no_such_alias(model, alias)
    return get_version(model, number)


def alias_set(*, model: RegisteredModel, alias: str, version: int, user: Any) -> ModelAlias:
    """Point ``alias`` of ``model`` at version number ``version``: create it (SET) or move it
    (MOVE) in one UPDATE; return the alias with its model, version and ``set_by`` loaded.

    Raises:
        ModelPermissionDenied: ``user`` is neither the model's owner nor staff.
        InvalidInput: ``{"alias": [...]}`` for a bad or reserved name, ``{"version": [...]}``
            for a version the model does not have.
    """
    check_can_modify(model, user)
    validate_alias_name(alias)
    with transaction.atomic():
        # The model row's lock serialises this model's alias changes, registrations and
        # version deletions: the alias row needs no lock of its own.
        lock_model(model.pk)
        target = ModelVersion.objects.filter(model=model, version=version).first()
        if target is None:
            raise InvalidInput({"version": [f"Model {model.name!r} has no version {version}."]})
        current = aliases_of(model).filter(alias=alias).first()
        if current is not None:
            current.model = model  # the caller's row: the answer names the model
            if current.version_id == target.pk:
                return current
        now = timezone.now()
        if current is None:
            current = ModelAlias.objects.create(
                model=model, alias=alias, version=target, set_by=user, updated_at=now
            )
            action, previous = AliasAction.SET, None
        else:
            previous = current.version.version
            current.version, current.set_by, current.updated_at = target, user, now
            current.save(update_fields=["version", "set_by", "updated_at"])
            action = AliasAction.MOVE
        ModelAliasEvent.objects.create(
            model=model,
            alias=alias,
            action=action,
            from_version=previous,
            to_version=target.version,
            user=user,
            created_at=now,
        )
    return current


def alias_delete(*, model: RegisteredModel, alias: str, user: Any) -> None:
    """Delete ``alias`` of ``model`` (recorded as DELETE).

    Raises:
        ModelPermissionDenied: ``user`` is neither the model's owner nor staff.
        ModelNotFound: ``{"alias": [...]}`` when the model has no such alias.
    """
    check_can_modify(model, user)
    if not _could_exist(alias):
        raise _no_such_alias(model, alias)
    with transaction.atomic():
        lock_model(model.pk)
        current = aliases_of(model).filter(alias=alias).first()
        if current is None:
            raise _no_such_alias(model, alias)
        ModelAliasEvent.objects.create(
            model=model,
            alias=alias,
            action=AliasAction.DELETE,
            from_version=current.version.version,
            to_version=None,
            user=user,
        )
        current.delete()
