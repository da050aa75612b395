"""Shared pydantic plumbing: a strict base model and tagged unions with readable errors.

Determined's experiment config rejects unknown keys and picks a variant by a key (``type`` for
hyperparameters and checkpoint storage, ``name`` for searchers). These helpers give every such
place the same behaviour and let ``_errors`` turn pydantic's errors into dotted field paths.
Union tags look like ``"hp:int"``; they appear in pydantic's error locations, where they tell
which model was validated, and ``_errors`` drops them from the paths it shows.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Discriminator, Tag
from pydantic_core import PydanticCustomError


class StrictModel(BaseModel):
    """Base of every config section: unknown keys are errors, strict types, immutable.

    ``strict=True`` keeps YAML types honest (``"5"`` is not an int, ``1`` is not a bool), as in
    Determined's JSON-schema validation. ``_errors`` lists the allowed field names next to an
    unknown one (see ``model_at``).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


FIELD_ERROR = "field_error"


def field_error(field: str, message: str) -> PydanticCustomError:
    """An error for one field, raised from a model-level validator (e.g. ``maxval`` vs ``minval``).

    pydantic locates model-validator errors at the model; ``_errors`` appends ``field``.
    """
    return PydanticCustomError(FIELD_ERROR, "{message}", {"field": field, "message": message})


def reject_unsupported(data: Any, unsupported: dict[str, str]) -> Any:
    """For a ``mode="before"`` model validator: refuse keys Headway does not implement yet.

    Arguments:
        data: the raw mapping being validated (anything else passes through).
        unsupported: key -> why it is refused and what to do instead.

    Raises:
        PydanticCustomError: a ``field_error`` naming the first unsupported key present.
    """
    if isinstance(data, dict):
        for key, why in unsupported.items():
            if key in data:
                raise field_error(key, f"not supported: {why}")
    return data


@dataclasses.dataclass(frozen=True)
class _UnionInfo:
    key: str
    members: dict[str, Any]
    public: tuple[str, ...]

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.members)


# Tag prefix -> the union's key and members, for error messages and ``model_at``.
UNIONS: dict[str, _UnionInfo] = {}
TAG_SEPARATOR = ":"
UNION_ERROR = "union_choice"


def is_tag(part: object) -> bool:
    """True for a tagged-union tag that pydantic inserted into an error location."""
    if not isinstance(part, str) or TAG_SEPARATOR not in part:
        return False
    prefix, _, choice = part.partition(TAG_SEPARATOR)
    info = UNIONS.get(prefix)
    return info is not None and choice in info.choices


def _as_model(annotation: Any) -> type[BaseModel] | None:
    # Unwrap Optional[...] / Annotated[...] down to a single model class, if there is one.
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        models = [m for m in map(_as_model, get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def model_at(root: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class that validated the mapping at ``loc`` (a raw pydantic location, tags
    included), or None when it cannot be told; used to list allowed names for unknown keys."""
    current: type[BaseModel] | None = root
    for part in loc:
        if is_tag(part):
            prefix, _, choice = str(part).partition(TAG_SEPARATOR)
            current = _as_model(UNIONS[prefix].members[choice])
        elif current is not None and part in current.model_fields:
            current = _as_model(current.model_fields[str(part)].annotation)
        else:
            current = None  # a dict key or list index; a later tag may tell the model again
    return current


def tagged_union(
    prefix: str,
    key: str,
    members: dict[str, Any],
    *,
    fallback: Callable[[Any], str | None] | None = None,
    hidden: tuple[str, ...] = (),
) -> Any:
    """Build ``Annotated[Union[...], Discriminator]`` choosing a member by ``data[key]``.

    Arguments:
        prefix (str): unique name of this union, used in tags (``"hp"``, ``"storage"``).
        key (str): the discriminating key (``"type"`` or ``"name"``).
        members (dict[str, type]): key value -> pydantic type. Adding a variant later (``s3``,
            ``random``) is one more entry here.
        fallback (callable | None): chooses a member name for inputs that are not a mapping with
            ``key`` (e.g. a bare hyperparameter value means ``const``); returns None to fail.
        hidden (tuple[str, ...]): member names that only ``fallback`` picks, left out of the
            "allowed" list in errors.
    """
    UNIONS[prefix] = _UnionInfo(
        key=key,
        members=dict(members),
        public=tuple(name for name in members if name not in hidden),
    )

    def choose(value: Any) -> str | None:
        if isinstance(value, BaseModel) and hasattr(value, key):
            return f"{prefix}{TAG_SEPARATOR}{getattr(value, key)}"
        if isinstance(value, dict) and key in value:
            return f"{prefix}{TAG_SEPARATOR}{value[key]}"
        if fallback is not None:
            name = fallback(value)
            return None if name is None else f"{prefix}{TAG_SEPARATOR}{name}"
        return None

    variants = tuple(
        Annotated[member, Tag(f"{prefix}{TAG_SEPARATOR}{name}")] for name, member in members.items()
    )
    # A custom error type names the union, so ``_errors`` can say which key and values are allowed.
    discriminator = Discriminator(
        choose, custom_error_type=f"{UNION_ERROR}.{prefix}", custom_error_message="invalid choice"
    )
    return Annotated[Union[variants], discriminator]  # noqa: UP007
