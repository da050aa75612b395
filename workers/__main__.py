"""``python -m workers``: this host's agent (one per GPU host), sized to its slots.

Steps: check the settings a host needs (``HEADWAY_MASTER``, ``HEADWAY_HOST_TOKEN``;
``workers.config``), a ``HEADWAY_TRIAL_USER`` that must be able to run this Python, a
``HEADWAY_HOST_ADDRESS`` that must be this host's; detect the host and print it; then replace
this process with ``celery -A workers worker`` consuming the host's queue with one thread per
slot plus one. It never reads database settings.
"""

from __future__ import annotations

import os
import sys

try:
    from workers.config import AgentConfigError, settings
except Exception as exc:
    # The settings are read from the environment at import: a malformed value (HEADWAY_SLOTS=two,
    # a bad HEADWAY_HOST_NAME) stops the agent here with its message, which names the variable.
    if type(exc).__name__ != "AgentConfigError":
        raise
    sys.exit(f"headway worker: {exc}")

from headway.launch._network import HostAddressError
from workers import isolation
from workers.address import host_address
from workers.hosts import celery_command, detect_host, host_queue


def _advertised_address() -> str:
    """This host's advertised address; a ``HEADWAY_HOST_ADDRESS`` that is not this host's
    stops the agent here, not at its first trial over several hosts. "" when it is unset and
    no route to the master exists yet (one-host runs do not need it)."""
    try:
        return host_address()
    except HostAddressError as exc:
        if settings.HEADWAY_HOST_ADDRESS:
            raise AgentConfigError(str(exc)) from None
        return ""


def main() -> None:
    """Check, print, exec Celery (see module); exit 2 naming the setting that is wrong."""
    try:
        settings.require_master()
        user = isolation.trial_user()
        if user is not None:
            isolation.check_trial_user_runs_python(user)
        address = _advertised_address()
    except AgentConfigError as exc:
        sys.exit(f"headway worker: {exc}")
    spec = detect_host()
    kind = "GPU" if spec.gpu else "CPU"
    print(
        f"Host {spec.name}: {spec.slots} {kind} slot(s) [{', '.join(spec.devices)}], "
        f"queue {host_queue(spec.name)}, master {settings.HEADWAY_MASTER_URL}, "
        f"address {address or 'unknown'}",
        flush=True,
    )
    argv = celery_command(host_queue(spec.name), spec.slots + 1)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
