"""The host agent's settings, read from its environment (no Django, no database settings).

A worker host needs three things from its admin (docs/deployment.md, "Adding a GPU host"):
``HEADWAY_MASTER`` (the master's URL), ``HEADWAY_HOST_TOKEN`` (its host token, ``manage.py
headway_host_token NAME --create``) and the broker (``HEADWAY_BROKER_URL``, or ``REDIS_URL``).
Everything else has a default. The lease timing (heartbeat interval, lease, kill grace) is the
master's: every heartbeat answer carries it (``headway.client.HostInfo``) and ``adopt_timing``
applies it, so the two sides never disagree on when a lease ends; the variables of the same
names only set the values used before the first answer.

The variables the master reads too (queue, pool, host name and slots, timing, folders, limits)
are parsed by ``headway.cluster_settings.SharedSettings``, the one definition both sides use; the
agent's own (master URL, host token, broker, stop poll, re-attach) are read here.

``settings`` is one mutable object read at import; tests and ``manage.py serve`` set the
environment of the agent process, in-process tests ``configure(**values)``.
"""

from __future__ import annotations

import os
from pathlib import Path

from headway.cluster_settings import SettingsError, SharedSettings


class AgentConfigError(Exception):
    """A host agent setting is missing or invalid; the message names the variable."""


def _env_text(name: str, default: str = "") -> str:
    value = os.environ.get(name, "")
    return value if value != "" else default


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise AgentConfigError(f"{name} must be a number, got {raw!r}") from None


class AgentSettings:
    """What one host agent process runs with (attribute names are the variables').

    Attributes:
        HEADWAY_MASTER_URL (str): the master's URL (``HEADWAY_MASTER``, or
            ``HEADWAY_MASTER_URL``); trials report there too.
        HEADWAY_HOST_TOKEN (str): this host's token (``hwh_...``); it names the host.
        BROKER_URL (str): Celery's broker (``HEADWAY_BROKER_URL``, else ``REDIS_URL``, else the
            filesystem transport under ``VAR_DIR/broker``: the embedded single-machine setup).
        HEADWAY_QUEUE (str): the cluster's queue prefix; this host consumes
            ``<HEADWAY_QUEUE>.host.<HEADWAY_HOST_NAME>``.
        HEADWAY_RESOURCE_POOL (str): the pool the host joins.
        HEADWAY_HOST_NAME (str): must be the host token's name.
        HEADWAY_SLOTS (int | None): CPU slots to offer (None: the GPUs, else one CPU slot).
        HEADWAY_HOST_HEARTBEAT_SECONDS, HEADWAY_LEASE_SECONDS, HEADWAY_KILL_GRACE_SECONDS
            (float): until the first heartbeat answer, then the master's.
        HEADWAY_HEARTBEAT_SECONDS (float): a running trial's heartbeat.
        HEADWAY_STOP_POLL_SECONDS (float): the most a kill (or a share's run ending) waits to
            be seen: the run's heartbeat is sent at least this often, and answers it.
        HEADWAY_HEARTBEAT_TIMEOUT_SECONDS (float): how long a host retries a call to an
            unreachable master outside a run's supervision (never less than the tolerance).
        HEADWAY_OUTAGE_TOLERANCE_SECONDS (float): how long a running trial rides out an
            unreachable master before its processes are stopped (until the first heartbeat
            answer, then the master's): ``outage_budget()``.
        HEADWAY_LOG_FLUSH_SECONDS (float): the longest a log line waits before it is sent.
        HEADWAY_REATTACH_SECONDS (float): how long a one-host trial outlives its killed agent,
            waiting for a restarted agent to re-attach it (``workers.reattach``; default 30);
            0: it is stopped at once.
        HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS (float): how long a run's hosts wait for each other.
        Others as in docs/configuration.md.
    """

    def __init__(self) -> None:
        try:
            shared = SharedSettings.from_environment()
        except SettingsError as exc:
            raise AgentConfigError(str(exc)) from None
        # What the master reads too, parsed once for both (headway.cluster_settings).
        self.VAR_DIR = shared.var_dir(Path.cwd() / "var")
        self.HEADWAY_VISIBILITY_TIMEOUT = shared.HEADWAY_VISIBILITY_TIMEOUT
        self.HEADWAY_QUEUE = shared.HEADWAY_QUEUE
        self.HEADWAY_RESOURCE_POOL = shared.HEADWAY_RESOURCE_POOL
        self.HEADWAY_HOST_NAME = shared.HEADWAY_HOST_NAME
        self.HEADWAY_SLOTS: int | None = shared.HEADWAY_SLOTS
        self.HEADWAY_HOST_ADDRESS = shared.HEADWAY_HOST_ADDRESS
        self.HEADWAY_WORK_DIR = shared.work_dir(self.VAR_DIR)
        self.HEADWAY_CHECKPOINT_DIR = shared.checkpoint_dir(self.VAR_DIR)
        self.HEADWAY_TRIAL_USER = shared.HEADWAY_TRIAL_USER
        self.HEADWAY_TRIAL_ENV = list(shared.HEADWAY_TRIAL_ENV)
        self.HEADWAY_HOST_HEARTBEAT_SECONDS = shared.HEADWAY_HOST_HEARTBEAT_SECONDS
        self.HEADWAY_KILL_GRACE_SECONDS = shared.HEADWAY_KILL_GRACE_SECONDS
        self.HEADWAY_LEASE_SECONDS = shared.HEADWAY_LEASE_SECONDS
        self.HEADWAY_HEARTBEAT_SECONDS = shared.HEADWAY_HEARTBEAT_SECONDS
        self.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS = shared.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS
        self.HEADWAY_OUTAGE_TOLERANCE_SECONDS = shared.HEADWAY_OUTAGE_TOLERANCE_SECONDS
        self.HEADWAY_LOG_FLUSH_SECONDS = shared.HEADWAY_LOG_FLUSH_SECONDS
        self.HEADWAY_MAX_LOG_LINE_CHARS = shared.HEADWAY_MAX_LOG_LINE_CHARS
        self.HEADWAY_THREADS_PER_SLOT = shared.HEADWAY_THREADS_PER_SLOT
        self.HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS = shared.HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS
        self.HEADWAY_MAX_MODEL_DEF_BYTES = shared.HEADWAY_MAX_MODEL_DEF_BYTES
        self.HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS = shared.HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS
        self.HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES = shared.HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES
        # The agent's own.
        self.HEADWAY_MASTER_URL = (
            _env_text("HEADWAY_MASTER") or _env_text("HEADWAY_MASTER_URL")
        ).rstrip("/")
        self.HEADWAY_HOST_TOKEN = _env_text("HEADWAY_HOST_TOKEN")
        self.BROKER_URL = _env_text("HEADWAY_BROKER_URL") or _env_text("REDIS_URL")
        self.HEADWAY_STOP_POLL_SECONDS = _env_number("HEADWAY_STOP_POLL_SECONDS", 2.0)
        self.HEADWAY_REATTACH_SECONDS = _env_number("HEADWAY_REATTACH_SECONDS", 30.0)

    def require_master(self) -> None:
        """Raise ``AgentConfigError`` naming what a worker host cannot start without."""
        missing = [
            name
            for name, value in (
                ("HEADWAY_MASTER", self.HEADWAY_MASTER_URL),
                ("HEADWAY_HOST_TOKEN", self.HEADWAY_HOST_TOKEN),
            )
            if not value
        ]
        if missing:
            raise AgentConfigError(
                f"a worker host needs {' and '.join(missing)} (docs/deployment.md, "
                "'Adding a GPU host'); it never reads database settings"
            )

    def adopt_timing(
        self,
        heartbeat_seconds: float,
        lease_seconds: float,
        kill_grace_seconds: float,
        outage_tolerance_seconds: float | None = None,
    ) -> None:
        """Take the master's heartbeat interval, lease, kill grace and outage tolerance
        (seconds; None: a master that sends none, this host's setting stays)."""
        self.HEADWAY_HOST_HEARTBEAT_SECONDS = heartbeat_seconds
        self.HEADWAY_LEASE_SECONDS = lease_seconds
        self.HEADWAY_KILL_GRACE_SECONDS = kill_grace_seconds
        if outage_tolerance_seconds is not None:
            self.HEADWAY_OUTAGE_TOLERANCE_SECONDS = outage_tolerance_seconds

    def outage_budget(self) -> float:
        """Seconds a host keeps a run (and retries its calls) while the master is unreachable:
        the outage tolerance, never less than the lease (docs/deployment.md, "Outages of the
        master")."""
        return max(self.HEADWAY_OUTAGE_TOLERANCE_SECONDS, self.HEADWAY_LEASE_SECONDS)


settings = AgentSettings()


def configure(**values: object) -> None:
    """Set settings by attribute name (in-process tests; a process reads its environment).

    Raises:
        AgentConfigError: a name that is not a setting.
    """
    for name, value in values.items():
        if not hasattr(settings, name):
            raise AgentConfigError(f"no host agent setting {name}")
        setattr(settings, name, value)


def reload() -> AgentSettings:
    """Read the settings again from the environment, in place."""
    settings.__dict__.update(AgentSettings().__dict__)
    return settings
