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

``type: agent``: hosts running Headway's host agent (``python -m workers``), placed by
Headway's scheduler. ``type: slurm``: each run is a Slurm batch job (``registry.slurm``), with
the job settings of ``_slurm.SlurmPoolSettings`` (partition, gres_per_slot, time_limit...),
which an agent pool refuses. The pool
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
from pydantic import Field, ValidationError, field_validator

from headway.expconf import check_resource_pool_name
from registry.pools._slurm import SLURM_FIELDS, SlurmPoolSettings

ENV = "HEADWAY_RESOURCE_POOLS"
DEFAULT_POOL = "default"
_MAX_FILE_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class ResourcePool:
    """One pool of the admin's file.

    Attributes:
        name (str): what ``resources.resource_pool`` and ``HEADWAY_RESOURCE_POOL`` say.
        type (str): ``agent`` (Headway's host agents) or ``slurm`` (runs as Slurm jobs).
        description (str): free text for people ("" when not given).
        slurm (SlurmPoolSettings | None): the job settings of a ``slurm`` pool; None for agent.
    """

    name: str
    type: str
    description: str = ""
    slurm: SlurmPoolSettings | None = None

    @property
    def is_slurm(self) -> bool:
        """Whether Slurm places this pool's runs (not Headway's scheduler)."""
        return self.type == SLURM


AGENT = "agent"
SLURM = "slurm"


class _Entry(SlurmPoolSettings):
    # The slurm fields are declared once (SlurmPoolSettings); an agent entry may not set them.
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
        if value not in (AGENT, SLURM):
            raise ValueError(f"unknown type {value!r}; the types: {AGENT}, {SLURM}")
        return value

    def slurm_settings(self) -> SlurmPoolSettings:
        return SlurmPoolSettings.model_validate(
            {field: getattr(self, field) for field in self.model_fields_set & SLURM_FIELDS}
        )


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

    def slurm_pools(self) -> list[ResourcePool]:
        """The pools of type ``slurm``, in the file's order."""
        return [pool for pool in self.pools.values() if pool.is_slurm]


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
            other than ``agent`` or ``slurm``, a slurm setting on an agent pool, a bad slurm
            setting (``registry.pools._slurm``) or a name listed twice.
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
        slurm = entry.slurm_settings() if entry.type == SLURM else None
        pools[entry.name] = ResourcePool(entry.name, entry.type, entry.description, slurm)
    if DEFAULT_POOL not in pools:
        pools = {DEFAULT_POOL: EMBEDDED.pools[DEFAULT_POOL], **pools}
    return ResourcePools(pools)


def _entry(path: str | os.PathLike[str], data: list, index: int) -> _Entry:
    """Entry ``index`` of the file checked, or ImproperlyConfigured naming it and its field."""
    try:
        entry = _Entry.model_validate(data[index])
    except ValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        loc = ("pools", index, *first["loc"])
        raise ImproperlyConfigured(
            f"{ENV}: {path}: {_where(str(path), data, loc)}: {message}"
        ) from None
    if entry.type == AGENT:
        misplaced = sorted(entry.model_fields_set & SLURM_FIELDS)
        if misplaced:
            loc = ("pools", index, misplaced[0])
            raise ImproperlyConfigured(
                f"{ENV}: {path}: {_where(str(path), data, loc)}: only a pool of type slurm "
                "takes this setting"
            )
    return entry


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
