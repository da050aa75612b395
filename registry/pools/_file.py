"""The admin's resource pools: ``HEADWAY_RESOURCE_POOLS`` names a YAML file listing them.

Determined's master config lists ``resource_pools`` (each a name, a description and a
provider); an experiment picks one with ``resources.resource_pool`` and an agent joins one.
Headway's file is a list of entries::

    - name: default
      type: agent
      description: the shared A100 hosts
    - name: big
      type: agent
      description: 8-GPU hosts for wide trials

``type`` names a pool type (``registry/pools/<type>/``, found by ``registry.pools.discovery``):
``agent`` for hosts running Headway's host agent (``python -m workers``), placed by Headway's
scheduler; the other types' folders document theirs. Any other key of an entry is the type's
own setting, checked by its provider's ``settings_model`` (a type without one refuses them).
The pool ``default`` (agent) always exists: unset, the file is that one pool; a file that leaves
it out gets it added (an experiment without ``resources.resource_pool`` and a worker without
``HEADWAY_RESOURCE_POOL`` both mean ``default``, so it must be there; docs/decisions/scheduling.md).

This module only reads and checks the file; it imports no model, so ``RegistryConfig.ready``
can check it while Django starts (a bad file stops every process at start-up).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Annotated

import yaml
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from headway.expconf import check_resource_pool_name
from registry.pools.discovery import DEFAULT_TYPE, pool_provider, pool_providers
from registry.pools.provider import HostOrigin

ENV = "HEADWAY_RESOURCE_POOLS"
DEFAULT_POOL = "default"
_MAX_FILE_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class ResourcePool:
    """One pool of the admin's file.

    Attributes:
        name (str): what ``resources.resource_pool`` and ``HEADWAY_RESOURCE_POOL`` say.
        type (str): its pool type (``agent``: Headway's host agents; see ``registry.pools``).
        description (str): free text for people ("" when not given).
        settings (BaseModel | None): the type's own settings (its provider's
            ``settings_model``), None for a type without any.
    """

    name: str
    type: str
    description: str = ""
    settings: BaseModel | None = None

    @property
    def hosts_per_run(self) -> bool:
        """Whether the pool makes its hosts per run and places its runs itself (not Headway's
        scheduler; ``HostOrigin.PER_RUN``)."""
        return pool_provider(self.type).host_origin is HostOrigin.PER_RUN


class _Entry(BaseModel):
    # The type's own settings are the entry's other keys, checked by its settings_model.
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=63)]
    type: str
    description: Annotated[str, Field(max_length=1000)] = ""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return check_resource_pool_name(value)

    @field_validator("type")
    @classmethod
    def _check_type(cls, value: str) -> str:
        types = pool_providers()
        if value not in types:
            raise ValueError(f"unknown type {value!r}; the types: {', '.join(types)}")
        return value


@dataclasses.dataclass(frozen=True)
class ResourcePools:
    """The pools by name, in the file's order (``default`` first when the file left it out)."""

    pools: dict[str, ResourcePool]

    def names(self) -> list[str]:
        """The pool names, in the file's order."""
        return list(self.pools)

    def known(self) -> str:
        """The names as one comma-separated string, for error messages."""
        return ", ".join(self.pools)

    def of_type(self, type_name: str) -> list[ResourcePool]:
        """The pools of type ``type_name``, in the file's order."""
        return [pool for pool in self.pools.values() if pool.type == type_name]

    def hosts_per_run(self) -> list[str]:
        """The names of the pools that make their hosts per run (``ResourcePool.hosts_per_run``)."""
        return [pool.name for pool in self.pools.values() if pool.hosts_per_run]


EMBEDDED = ResourcePools({DEFAULT_POOL: ResourcePool(DEFAULT_POOL, DEFAULT_TYPE)})


def _where(path: str, data: object, loc: tuple[int | str, ...]) -> str:
    # "entry 2 (name gpu-big), field type": the entry by position and, when it has one, name.
    if len(loc) < 2 or not isinstance(loc[1], int):
        return "the file"
    index = loc[1]
    entry = data[index] if isinstance(data, list) and index < len(data) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    label = f"entry {index + 1}" + (f" (name {name!r})" if isinstance(name, str) else "")
    field = ".".join(str(part) for part in loc[2:])
    return f"{label}, field {field}" if field else label


def load_resource_pools(path: str | os.PathLike[str]) -> ResourcePools:
    """Read and check the pools file at ``path`` (YAML or JSON: a list of pool entries).

    Returns:
        The pools; ``default`` (agent) is added first when the file does not name it.

    Raises:
        ImproperlyConfigured: naming ``HEADWAY_RESOURCE_POOLS``, the file, and the entry
            (position and name) and field at fault: an unreadable or non-YAML file, a file that
            is not a list, an unknown key, a missing ``name`` or ``type``, a bad name, an
            unknown type, a setting of another type, a bad setting of the pool's type (its
            provider's ``settings_model``) or a name listed twice.
    """
    try:
        raw = Path(path).read_bytes()[: _MAX_FILE_BYTES + 1]
        if len(raw) > _MAX_FILE_BYTES:
            raise ImproperlyConfigured(f"{ENV}: {path} is over {_MAX_FILE_BYTES} bytes")
        data = yaml.safe_load(raw)
    except OSError as exc:
        raise ImproperlyConfigured(f"{ENV}: cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ImproperlyConfigured(f"{ENV}: {path} is not YAML: {exc}") from None
    if not isinstance(data, list):
        raise ImproperlyConfigured(
            f"{ENV}: {path}: the file must be a list of pools (- name: ..., type: agent), "
            f"got {type(data).__name__}"
        )
    entries = [_entry(path, data, index) for index in range(len(data))]
    pools: dict[str, ResourcePool] = {}
    for index, entry in enumerate(entries):
        if entry.name in pools:
            raise ImproperlyConfigured(
                f"{ENV}: {path}: entry {index + 1} (name {entry.name!r}), field name: listed twice"
            )
        pools[entry.name] = entry
    if DEFAULT_POOL not in pools:
        pools = {DEFAULT_POOL: EMBEDDED.pools[DEFAULT_POOL], **pools}
    return ResourcePools(pools)


def _entry(path: str | os.PathLike[str], data: list, index: int) -> ResourcePool:
    """Entry ``index`` of the file checked, or ImproperlyConfigured naming it and its field."""

    def fail(exc: ValidationError) -> ImproperlyConfigured:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        loc = ("pools", index, *first["loc"])
        return ImproperlyConfigured(f"{ENV}: {path}: {_where(str(path), data, loc)}: {message}")

    try:
        entry = _Entry.model_validate(data[index])
    except ValidationError as exc:
        raise fail(exc) from None
    own = dict(entry.model_extra or {})
    model = pool_provider(entry.type).settings_model
    allowed: set[str] = set(model.model_fields) if model is not None else set()
    if not own.keys() <= allowed:
        misplaced = sorted(key for key in own if key not in allowed)[0]
        # A key another type takes says which; any other is unknown.
        takers = [
            name
            for name, provider in pool_providers().items()
            if provider.settings_model is not None
            and misplaced in provider.settings_model.model_fields
        ]
        why = (
            f"only a pool of type {' or '.join(takers)} takes this setting"
            if takers
            else "Extra inputs are not permitted"
        )
        raise ImproperlyConfigured(
            f"{ENV}: {path}: {_where(str(path), data, ('pools', index, misplaced))}: {why}"
        )
    settings = None
    if model is not None:
        try:
            settings = model.model_validate(own)
        except ValidationError as exc:
            raise fail(exc) from None
    return ResourcePool(entry.name, entry.type, entry.description, settings)


@functools.lru_cache(maxsize=8)
def _cached(path: str) -> ResourcePools:
    return load_resource_pools(path)


def resource_pools() -> ResourcePools:
    """This process's pools: the file ``settings.HEADWAY_RESOURCE_POOLS`` names, parsed once per
    process and path (a changed file takes effect at restart), else only ``default``.

    Raises:
        ImproperlyConfigured: as ``load_resource_pools``.
    """
    from django.conf import settings

    path = getattr(settings, "HEADWAY_RESOURCE_POOLS", "")
    return _cached(str(path)) if path else EMBEDDED
