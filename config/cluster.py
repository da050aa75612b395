"""The cluster's timing and host settings, read from the environment: kill grace, heartbeats,
leases, outage tolerance, host identity and slots, rendezvous and unmanaged runs' timeouts
(docs/configuration.md). ``config.settings`` imports every name; the checks between them (a lease
at least two heartbeats, a margin above the kill grace, ...) stop start-up with
``ImproperlyConfigured`` naming the variables.

What the host agents read too is parsed once, by ``headway.cluster_settings.SharedSettings``
(``SHARED``: the same type, default and bounds on both sides); the master's own variables are
read here with ``config.env``'s readers.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from config.env import envfloat, envint
from headway.cluster_settings import SettingsError, SharedSettings

try:
    SHARED = SharedSettings.from_environment()
except SettingsError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# Kill: seconds between SIGTERM and SIGKILL of a trial's process group.
HEADWAY_KILL_GRACE_SECONDS = SHARED.HEADWAY_KILL_GRACE_SECONDS
# Workers heartbeat each run this often (renewing its lease, below); the timeout bounds how long
# a worker retries its database calls through an outage (logs, a run's exit).
HEADWAY_HEARTBEAT_SECONDS = SHARED.HEADWAY_HEARTBEAT_SECONDS
HEADWAY_HEARTBEAT_TIMEOUT_SECONDS = SHARED.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS
# A placed run no worker claimed this long after its task was sent gets the task again (a lost
# broker message; registry/scheduling/_redispatch.py).
HEADWAY_DISPATCH_TIMEOUT_SECONDS = envint("HEADWAY_DISPATCH_TIMEOUT_SECONDS", 120)
# A run lost before its ranks started is re-queued after an exponential back-off: this many
# seconds after the first loss in a row, doubling, at most the cap (registry/lifecycle/_lost.py).
HEADWAY_LOST_BACKOFF_SECONDS = envfloat("HEADWAY_LOST_BACKOFF_SECONDS", 10, minimum=0)
HEADWAY_LOST_BACKOFF_MAX_SECONDS = envfloat("HEADWAY_LOST_BACKOFF_MAX_SECONDS", 300, minimum=0)
# A host on which this many runs in a row were lost before their ranks started is drained
# (registry.lifecycle._host_health); 0: never.
HEADWAY_HOST_MAX_FAILED_STARTS = envint("HEADWAY_HOST_MAX_FAILED_STARTS", 3)
if HEADWAY_HOST_MAX_FAILED_STARTS < 0:
    raise ImproperlyConfigured(
        f"HEADWAY_HOST_MAX_FAILED_STARTS must be 0 (never drain) or more, "
        f"got {HEADWAY_HOST_MAX_FAILED_STARTS}"
    )
HEADWAY_LOG_FLUSH_SECONDS = SHARED.HEADWAY_LOG_FLUSH_SECONDS
# Torch/OMP threads per slot handed to trial processes (0 = leave torch's default).
HEADWAY_THREADS_PER_SLOT = SHARED.HEADWAY_THREADS_PER_SLOT
# Slot scheduling (docs/scheduling.md). A worker registers its host under this name (unique per
# worker; it is part of the host's Celery queue name, hence the character set).
HEADWAY_HOST_NAME = SHARED.HEADWAY_HOST_NAME
# Unset: the worker's slots are its GPUs (or one CPU slot without GPUs); set: that many CPU slots.
HEADWAY_SLOTS: int | None = SHARED.HEADWAY_SLOTS
# Workers upsert their host this often (and run a placement pass); a host whose last heartbeat
# is older than the timeout holds no slots for placement.
HEADWAY_HOST_HEARTBEAT_SECONDS = SHARED.HEADWAY_HOST_HEARTBEAT_SECONDS
# Leases (docs/scheduling.md, "Heartbeats, leases and lost hosts"): a placed run (and each share
# of one) leases its host's slots; the host's heartbeats renew the lease. A host that could not
# renew for HEADWAY_LEASE_SECONDS stops its ranks itself (SIGTERM, SIGKILL after the kill grace);
# the registry treats the run as lost only once the lease plus HEADWAY_LEASE_MARGIN_SECONDS
# passed, so the margin must cover the kill grace. A host that missed its last renewal
# (HEADWAY_HOST_TIMEOUT_SECONDS) takes no new runs: its lease state is unknown.
HEADWAY_LEASE_SECONDS = SHARED.HEADWAY_LEASE_SECONDS
HEADWAY_LEASE_MARGIN_SECONDS = envfloat(
    "HEADWAY_LEASE_MARGIN_SECONDS", HEADWAY_KILL_GRACE_SECONDS + 5
)
# How long an outage of the master (web tier or database) running trials ride out: a host that
# cannot reach the master keeps its runs this long after its last renewal, and while no host of
# a namespace is served the reaper waits this long plus the margin (registry/scheduling/_leases.py).
# Default 10 min, or the lease if longer (a tolerance is never below the lease).
HEADWAY_OUTAGE_TOLERANCE_SECONDS = SHARED.HEADWAY_OUTAGE_TOLERANCE_SECONDS
HEADWAY_HOST_TIMEOUT_SECONDS = envfloat(
    "HEADWAY_HOST_TIMEOUT_SECONDS",
    HEADWAY_HOST_HEARTBEAT_SECONDS + max(5.0, HEADWAY_HOST_HEARTBEAT_SECONDS / 2),
)
if HEADWAY_LEASE_SECONDS < 2 * HEADWAY_HOST_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        f"HEADWAY_LEASE_SECONDS ({HEADWAY_LEASE_SECONDS:g}) must be at least twice "
        f"HEADWAY_HOST_HEARTBEAT_SECONDS ({HEADWAY_HOST_HEARTBEAT_SECONDS:g}): one missed "
        "heartbeat must not stop a host's trials"
    )
if HEADWAY_LEASE_MARGIN_SECONDS <= HEADWAY_KILL_GRACE_SECONDS:
    raise ImproperlyConfigured(
        f"HEADWAY_LEASE_MARGIN_SECONDS ({HEADWAY_LEASE_MARGIN_SECONDS:g}) must be above "
        f"HEADWAY_KILL_GRACE_SECONDS ({HEADWAY_KILL_GRACE_SECONDS:g}): a host stops its ranks "
        "within the lease plus the kill grace, and only then may they run elsewhere"
    )
if HEADWAY_OUTAGE_TOLERANCE_SECONDS < HEADWAY_LEASE_SECONDS:
    raise ImproperlyConfigured(
        f"HEADWAY_OUTAGE_TOLERANCE_SECONDS ({HEADWAY_OUTAGE_TOLERANCE_SECONDS:g}) must be at "
        f"least HEADWAY_LEASE_SECONDS ({HEADWAY_LEASE_SECONDS:g}): a host keeps its runs through "
        "an outage of the master at least as long as a lease"
    )
if not HEADWAY_HOST_HEARTBEAT_SECONDS <= HEADWAY_HOST_TIMEOUT_SECONDS <= HEADWAY_LEASE_SECONDS:
    raise ImproperlyConfigured(
        f"HEADWAY_HOST_TIMEOUT_SECONDS ({HEADWAY_HOST_TIMEOUT_SECONDS:g}) must be between "
        f"HEADWAY_HOST_HEARTBEAT_SECONDS ({HEADWAY_HOST_HEARTBEAT_SECONDS:g}) and "
        f"HEADWAY_LEASE_SECONDS ({HEADWAY_LEASE_SECONDS:g}): a host that missed its renewal "
        "must stop being placeable before its leases expire"
    )
# Trials over several hosts (docs/distributed.md): the address the other hosts reach this one
# at (the chief host serves torchrun's rendezvous store there; unset: the source address of
# the route to the master, workers/address.py), and how long the hosts of one run wait for
# each other to start before the run is given up as lost.
HEADWAY_HOST_ADDRESS = SHARED.HEADWAY_HOST_ADDRESS
HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS = SHARED.HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS
# Unmanaged runs (headway.experimental.core_v2, docs/logging-from-anywhere.md): a script run
# outside the cluster heartbeats every quarter of this; one silent for this long is lost and its
# trial ends ERROR (registry.lifecycle.reap_lost_unmanaged_runs, with the lost-run reaper).
HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS = envfloat(
    "HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS", 300
)
if not HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS >= 4:
    raise ImproperlyConfigured(
        "HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS must be at least 4 (seconds), got "
        f"{HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS:g}"
    )
