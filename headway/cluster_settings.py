"""The environment variables the master and the host agents both read, defined once.

The master (``config.cluster``, ``config.settings``) and the host agent (``workers.config``)
each build a ``SharedSettings`` from their own environment, so one variable is parsed with one
type, one default and one set of bounds on both sides (docs/configuration.md lists them all).
Read through ``pydantic-settings``: an unset or empty variable takes its default; a value that
does not parse or is out of bounds raises ``SettingsError`` naming the variable, which the master
turns into Django's ``ImproperlyConfigured`` and the agent into ``AgentConfigError``.

What only one side reads stays with it: the master's lease margin, host timeout, back-offs and
limits of untrusted input in ``config/``; the agent's master URL, host token, broker and
re-attach and stop-poll timing in ``workers/config.py``. The checks *between* the timing
variables (a lease of at least two heartbeats, ...) are the master's (``config.cluster``): a
host takes its timing from the master's heartbeat answers, its own values only count until then.

This module imports neither Django nor the server (an import contract in pyproject.toml): it is
part of ``pip install headway``, which a GPU host runs. It is the cluster's configuration, not
the trial API.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from headway.archive import MAX_MODEL_DEF_BYTES

HOST_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}"


class SettingsError(ValueError):
    """An environment variable holds a value that does not parse or is out of bounds; the
    message names the variable (several, ``; ``-separated, when several are wrong)."""


def default_host_name() -> str:
    """The machine's host name with characters other than letters, digits, ``.``, ``_`` and
    ``-`` replaced by ``-`` (at most 200 characters; ``host`` when nothing is left)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:200] or "host"


def _default_lease(data: dict[str, Any]) -> float:
    return max(3 * float(data.get("HEADWAY_HOST_HEARTBEAT_SECONDS", 10.0)), 10.0)


def _default_outage_tolerance(data: dict[str, Any]) -> float:
    return max(600.0, float(data.get("HEADWAY_LEASE_SECONDS", 600.0)))


class SharedSettings(BaseSettings):
    """The variables both the master and every host agent read (field names are the
    variables'; descriptions say what each means, docs/configuration.md says more).

    Build it with ``SharedSettings.from_environment()`` (reads ``os.environ`` now).

    Raises:
        SettingsError: from ``from_environment()``, naming each variable that is wrong.
    """

    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, frozen=True)

    # Folders. Unset here: each side has its own default var folder (the master's repository
    # `var/`, an agent's working directory's `var/`), and the two others live under it.
    HEADWAY_VAR_DIR: Path | None = Field(
        default=None, description="base of the embedded defaults (unset: each side's own `var/`)"
    )
    HEADWAY_WORK_DIR: Path | None = Field(
        default=None,
        description="where hosts unpack model definitions (unset: $HEADWAY_VAR_DIR/work)",
    )
    HEADWAY_CHECKPOINT_DIR: Path | None = Field(
        default=None,
        description="root of the default shared_fs storage location "
        "(unset: $HEADWAY_VAR_DIR/checkpoints)",
    )
    # The cluster's namespace and a host's identity.
    HEADWAY_QUEUE: str = Field(
        default="headway", description="the cluster's queue prefix (namespace)"
    )
    HEADWAY_VISIBILITY_TIMEOUT: int = Field(
        default=43200,
        ge=1,
        description="Redis: seconds before an unacknowledged task is sent again",
    )
    HEADWAY_RESOURCE_POOL: str = Field(
        default="default", description="the resource pool a host joins"
    )
    HEADWAY_HOST_NAME: str = Field(
        default_factory=default_host_name,
        validate_default=True,
        description="the name a host registers under (part of its queue name)",
    )
    HEADWAY_SLOTS: int | None = Field(
        default=None,
        ge=0,
        description="CPU slots a host offers (unset: its GPUs, else one CPU slot)",
    )
    HEADWAY_HOST_ADDRESS: str = Field(
        default="", description="the address other hosts reach this one at (unset: found at start)"
    )
    # Trial processes.
    HEADWAY_TRIAL_USER: str = Field(
        default="", description="the Unix user trials run as (unset: ours)"
    )
    HEADWAY_TRIAL_ENV: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="comma-separated names of variables also passed to trial processes",
    )
    HEADWAY_THREADS_PER_SLOT: int = Field(
        default=0, ge=0, description="OMP/MKL threads per slot of a run (0: torch's default)"
    )
    # Timing (seconds). The lease and outage tolerance default to values derived from the
    # fields above them (field order matters).
    HEADWAY_KILL_GRACE_SECONDS: float = Field(
        default=10.0, ge=0, description="seconds between SIGTERM and SIGKILL of a trial"
    )
    HEADWAY_HEARTBEAT_SECONDS: float = Field(
        default=10.0, gt=0, description="how often a host heartbeats each run it runs"
    )
    HEADWAY_HEARTBEAT_TIMEOUT_SECONDS: float = Field(
        default=60.0, ge=0, description="how long a host retries a call to an unreachable master"
    )
    HEADWAY_HOST_HEARTBEAT_SECONDS: float = Field(
        default=10.0, gt=0, description="how often hosts renew their leases and host row"
    )
    HEADWAY_LEASE_SECONDS: float = Field(
        default_factory=_default_lease,
        gt=0,
        description="a run's lease on its host's slots (default: 3 heartbeats, at least 10)",
    )
    HEADWAY_OUTAGE_TOLERANCE_SECONDS: float = Field(
        default_factory=_default_outage_tolerance,
        ge=0,
        description="how long running trials ride out an unreachable master "
        "(default: 600, or the lease if longer)",
    )
    HEADWAY_LOG_FLUSH_SECONDS: float = Field(
        default=0.5, ge=0, description="the longest a trial's output line waits before it is sent"
    )
    HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS: float = Field(
        default=300.0,
        gt=0,
        description="how long the hosts of one run wait for each other to start",
    )
    # Limits of untrusted input both sides enforce.
    HEADWAY_MAX_LOG_LINE_CHARS: int = Field(
        default=64 * 1024, ge=1, description="longest trial log line kept; longer ones are cut"
    )
    HEADWAY_MAX_MODEL_DEF_BYTES: int = Field(
        default=MAX_MODEL_DEF_BYTES, ge=1, description="largest model definition, packed"
    )
    HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS: float = Field(
        default=20.0, gt=0, description="wall-time limit of checking one model definition"
    )
    HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES: int = Field(
        default=1024**3, ge=1, description="address-space limit of that check's child process"
    )

    @field_validator("HEADWAY_HOST_NAME")
    @classmethod
    def _host_name(cls, value: str) -> str:
        if not re.fullmatch(HOST_NAME_PATTERN, value):
            raise ValueError(
                f"HEADWAY_HOST_NAME must be letters, digits, '.', '_' or '-', got {value!r}"
            )
        return value

    @field_validator("HEADWAY_TRIAL_ENV", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @classmethod
    def from_environment(cls) -> SharedSettings:
        """Read ``os.environ`` now.

        Raises:
            SettingsError: naming every variable whose value does not parse or is out of bounds.
        """
        try:
            return cls()
        except ValidationError as exc:
            raise SettingsError(_explain(exc)) from None

    def var_dir(self, default: Path) -> Path:
        """``HEADWAY_VAR_DIR``, else ``default`` (the caller's own), as an absolute path."""
        return (self.HEADWAY_VAR_DIR or default).resolve()

    def work_dir(self, var_dir: Path) -> Path:
        """``HEADWAY_WORK_DIR``, else ``var_dir/work``, as an absolute path."""
        return (self.HEADWAY_WORK_DIR or var_dir / "work").resolve()

    def checkpoint_dir(self, var_dir: Path) -> Path:
        """``HEADWAY_CHECKPOINT_DIR``, else ``var_dir/checkpoints``, as an absolute path."""
        return (self.HEADWAY_CHECKPOINT_DIR or var_dir / "checkpoints").resolve()


def _explain(exc: ValidationError) -> str:
    """One sentence per wrong variable: ``NAME must be ..., got VALUE``."""
    sentences = []
    for error in exc.errors():
        if error["type"] == "default_factory_not_called":
            continue  # a default derived from a variable already named
        name = str(error["loc"][0]) if error["loc"] else "?"
        raw = error["input"]
        ctx = error.get("ctx", {})
        kind = error["type"]
        if kind.startswith("int_"):
            sentences.append(f"{name} must be an integer, got {raw!r}")
        elif kind.startswith("float_"):
            sentences.append(f"{name} must be a number, got {raw!r}")
        elif kind == "greater_than_equal":
            sentences.append(f"{name} must be {_number(ctx['ge'])} or more, got {raw}")
        elif kind == "greater_than":
            sentences.append(f"{name} must be above {_number(ctx['gt'])}, got {raw}")
        elif kind == "value_error":
            sentences.append(str(ctx["error"]))
        else:
            sentences.append(f"{name}: {error['msg']}, got {raw!r}")
    return "; ".join(sentences)


def _number(bound: object) -> str:
    return f"{bound:g}" if isinstance(bound, float) else str(bound)
