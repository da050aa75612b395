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

``type: agent``: hosts running Headway's worker (``python manage.py worker``), placed by
Headway's scheduler. Other types are refused until they exist (``slurm``: issue #22). The pool
``default`` (agent) always exists: unset, the file is that one pool; a file that leaves it out
gets it added (an experiment without ``resources.resource_pool`` and a worker without
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

ENV = "HEADWAY_RESOURCE_POOLS"
DEFAULT_POOL = "default"
_MAX_FILE_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class ResourcePool:
    """One pool of the admin's file.

    Attributes:
        name (str): what ``resources.resource_pool`` and ``HEADWAY_RESOURCE_POOL`` say.
        type (str): ``agent`` (Headway's worker hosts).
        description (str): free text for people ("" when not given).
    """

    name: str
    type: str
    description: str = ""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

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
        if value == "slurm":
            raise ValueError("type slurm is not supported yet (issue #22 adds it); use agent")
        if value != "agent":
            raise ValueError(f"unknown type {value!r}; the types: agent")
        return value


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    pools: list[_Entry]


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


EMBEDDED = ResourcePools({DEFAULT_POOL: ResourcePool(DEFAULT_POOL, "agent")})


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
            is not a list, an unknown key, a missing ``name`` or ``type``, a bad name, a type
            other than ``agent`` (``slurm``: "not supported yet") or a name listed twice.
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
    try:
        parsed = _File.model_validate({"pools": data})
    except ValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        raise ImproperlyConfigured(
            f"{ENV}: {path}: {_where(str(path), data, first['loc'])}: {message}"
        ) from None
    pools: dict[str, ResourcePool] = {}
    for index, entry in enumerate(parsed.pools):
        if entry.name in pools:
            raise ImproperlyConfigured(
                f"{ENV}: {path}: entry {index + 1} (name {entry.name!r}), field name: listed twice"
            )
        pools[entry.name] = ResourcePool(entry.name, entry.type, entry.description)
    if DEFAULT_POOL not in pools:
        pools = {DEFAULT_POOL: EMBEDDED.pools[DEFAULT_POOL], **pools}
    return ResourcePools(pools)


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
