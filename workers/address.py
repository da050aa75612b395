"""This worker host's advertised address (``HEADWAY_HOST_ADDRESS`` or the route to the
master), from the agent's settings; the logic is ``headway.launch._network``'s."""

from __future__ import annotations

import functools

from headway.launch._network import advertised_address
from workers.config import settings


def host_address() -> str:
    """The address other hosts reach this one on, found once per worker process.

    Derived (when ``HEADWAY_HOST_ADDRESS`` is unset) from the route to the master URL, then to
    the broker, never from the host name (Debian resolves it to ``127.0.1.1``).

    Raises:
        headway.launch._network.HostAddressError: naming ``HEADWAY_HOST_ADDRESS`` when it is
            not an address of this host, or when no route to those servers exists.
    """
    servers = [settings.HEADWAY_MASTER_URL, settings.BROKER_URL]
    return _advertised(settings.HEADWAY_HOST_ADDRESS, tuple(s for s in servers if s))


@functools.cache
def _advertised(explicit: str, servers: tuple[str, ...]) -> str:
    # Once per setting: a route lookup per launch is cheap, but the answer does not change.
    return advertised_address(explicit, servers)
