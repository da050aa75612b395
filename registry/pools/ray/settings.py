"""The settings of a ``type: ray`` pool in the admin's pools file.

They are the admin's alone (an experiment config has no Ray field). Every value is checked when
the file is read, so a typo stops the master at start-up::

    - name: ray
      type: ray
      address: http://ray-head:8265      # the Ray dashboard (Jobs API), as the master reaches it
      resources_per_slot: {CPU: 1}       # one bundle of the run's placement group per slot
      strategy: STRICT_SPREAD            # PACK (default) or STRICT_SPREAD: one slot per Ray node
      runtime_env:                       # Ray's runtime environment of the job (a subset)
        env_vars: {PYTHONPATH: /opt/headway}
      python: /opt/headway/bin/python    # on the Ray nodes (default: the master's)
      master_url: http://master:8000     # how the Ray nodes reach the master
      work_dir: /scratch/headway         # on the Ray nodes (default: HEADWAY_WORK_DIR)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from registry.pools import ResourcePool

# A Ray resource name: CPU, GPU, memory or a custom resource ("accelerator_type:A100").
_RESOURCE = re.compile(r"[A-Za-z_][A-Za-z0-9_:.\-]{0,99}")
# Runtime-environment keys a pool may set. Others (py_executable, worker_process_setup_hook...)
# would change how the job's processes start, which is Headway's to decide.
RUNTIME_ENV_KEYS = frozenset(
    {"env_vars", "working_dir", "py_modules", "pip", "uv", "conda", "excludes", "config"}
)
# Variables the job's processes get from Headway: a runtime_env setting them would contradict it.
_RESERVED_ENV = re.compile(r"HEADWAY_.*|RAY_ADDRESS|RAY_JOB_ID")


class RayPoolSettings(BaseModel):
    """A ray pool's settings (see the module's example).

    Attributes:
        address (str): the Ray dashboard's http(s) URL (its Jobs API); required.
        resources_per_slot (dict[str, float]): one bundle of the run's placement group: what
            one slot takes from a Ray node (default ``{CPU: 1}``; amounts > 0).
        strategy (str): the placement group's strategy, ``PACK`` (bundles on as few nodes as
            fit) or ``STRICT_SPREAD`` (each bundle on a node of its own).
        runtime_env (dict): Ray's runtime environment of the job (keys ``RUNTIME_ENV_KEYS``;
            ``env_vars`` str -> str, none of Headway's own).
        python (str | None): the Python on the Ray nodes with Headway installed (the job's
            entry point); None: the master's.
        master_url (str | None): the master's URL as the Ray nodes reach it.
        work_dir (str | None): the runs' working directories on the Ray nodes.
        stop_after_exit_seconds (int): how long a job may outlive its run's reported exit
            before the master stops it.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    address: Annotated[str, Field(min_length=1, max_length=500)]
    resources_per_slot: Annotated[dict[str, float | int], Field(min_length=1, max_length=16)] = {
        "CPU": 1
    }
    strategy: Literal["PACK", "STRICT_SPREAD"] = "PACK"
    runtime_env: dict[str, object] = {}
    python: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    master_url: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    work_dir: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    stop_after_exit_seconds: Annotated[int, Field(ge=1, le=3600)] = 60

    @field_validator("address", "master_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s'\"\\/]+/?", value):
            raise ValueError(f"{value!r} is not an http(s) URL of a host and port")
        return value

    @field_validator("resources_per_slot")
    @classmethod
    def _check_resources(cls, value: dict[str, float | int]) -> dict[str, float | int]:
        for name, amount in value.items():
            if not _RESOURCE.fullmatch(name):
                raise ValueError(f"{name!r} is not a Ray resource name")
            if isinstance(amount, bool) or not amount > 0:
                raise ValueError(f"{name}: {amount!r} is not an amount > 0")
        return value

    @field_validator("runtime_env")
    @classmethod
    def _check_runtime_env(cls, value: dict[str, object]) -> dict[str, object]:
        unknown = sorted(set(value) - RUNTIME_ENV_KEYS)
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)} cannot be set here (a pool takes "
                f"{', '.join(sorted(RUNTIME_ENV_KEYS))})"
            )
        env_vars = value.get("env_vars", {})
        if not isinstance(env_vars, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()
        ):
            raise ValueError("env_vars must map names to strings")
        reserved = sorted(k for k in env_vars if _RESERVED_ENV.fullmatch(k))
        if reserved:
            raise ValueError(f"env_vars {', '.join(reserved)}: set by Headway")
        return value

    @field_validator("python", "work_dir")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or any(c in value for c in "\n\r\0")):
            raise ValueError(f"{value!r} is not an absolute path")
        return value

    def bundles(self, slots: int) -> list[dict[str, float]]:
        """The placement group's bundles for a trial of ``slots`` (one per slot, at least one)."""
        return [{k: float(v) for k, v in self.resources_per_slot.items()}] * max(slots, 1)

    def slots_of(self, resources: dict[str, float]) -> int:
        """How many slots a Ray node (or free amounts) of ``resources`` holds."""
        return int(
            min(resources.get(k, 0.0) // float(v) for k, v in self.resources_per_slot.items())
        )


def ray_settings(pool: ResourcePool) -> RayPoolSettings:
    """The ray settings of ``pool`` (a pool of type ray; its ``settings`` as parsed).

    Raises:
        TypeError: ``pool`` is not of type ray.
    """
    if not isinstance(pool.settings, RayPoolSettings):
        raise TypeError(f"pool {pool.name!r} is of type {pool.type}, not ray")
    return pool.settings
