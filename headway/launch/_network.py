"""The address other hosts reach this host on, and the network interface that owns it.

A run over several hosts meets on the chief host's address (torchrun's store, gloo/NCCL
connections). The host name is no good for that: Debian and Ubuntu resolve it to
``127.0.1.1`` (``/etc/hosts``), so gloo would advertise loopback to the other hosts. Instead
(as Determined's agents advertise their ``--agent-address`` / the route to the master):

- ``HEADWAY_HOST_ADDRESS`` when set, which must be an address of this host;
- otherwise the source address the kernel picks to reach the master (a UDP socket's
  ``connect()`` to the master's host: a route lookup, no packet is sent), or, failing that,
  another server host the worker talks to (the broker's, the database's).

Ranks then get ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` naming the interface that owns
that address (``psutil.net_if_addrs``), so their collectives bind where the others connect.
Django-free: the worker (``workers.address``) and tests use it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

import psutil

HOST_ADDRESS_VAR = "HEADWAY_HOST_ADDRESS"
# The variables that pin torch.distributed's backends to one interface.
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


class HostAddressError(ValueError):
    """This host's advertised address is wrong or cannot be found; the message names
    ``HEADWAY_HOST_ADDRESS``."""


def local_addresses() -> dict[str, str]:
    """Every IPv4/IPv6 address of this host's interfaces, mapped to its interface name.

    An IPv6 link-local address keeps no ``%zone`` suffix.
    """
    found: dict[str, str] = {}
    for name, addresses in psutil.net_if_addrs().items():
        for item in addresses:
            if item.family in (socket.AF_INET, socket.AF_INET6):
                found.setdefault(item.address.split("%", 1)[0], name)
    return found


def interface_of(address: str) -> str | None:
    """The name of the interface that owns ``address`` (e.g. ``eth0``, ``lo``); None when no
    interface of this host has it."""
    return local_addresses().get(_normal(address))


def route_source_address(host: str, port: int = 9) -> str | None:
    """The source address the kernel picks to reach ``host`` (a name or an address), None when
    ``host`` does not resolve or no route leads there. Sends nothing: ``connect()`` on a UDP
    socket only looks the route up."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return None
    for family, kind, proto, _, target in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.connect(target)
                return _normal(str(sock.getsockname()[0]))
        except OSError:
            continue
    return None


def url_host(url: str) -> str | None:
    """The host part of a URL (``http://master:8000`` -> ``master``), None when it has none
    (or for a Unix socket path)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host or None


def advertised_address(explicit: str, servers: Iterable[str]) -> str:
    """The address this host advertises to the other hosts of a run.

    Args:
        explicit: ``HEADWAY_HOST_ADDRESS`` ("" when unset).
        servers: URLs of the servers this host talks to, most telling first (master, broker,
            database); the first whose host has a route gives the address.

    Returns:
        ``explicit`` when set (checked), else the route's source address.

    Raises:
        HostAddressError: ``explicit`` is not an IP address of this host, or it is unset and
            no server's host has a route (the message names ``HEADWAY_HOST_ADDRESS``).
    """
    if explicit:
        try:
            address = _normal(explicit)
        except ValueError:
            raise HostAddressError(
                f"{HOST_ADDRESS_VAR}={explicit!r} is not an IP address"
            ) from None
        if address not in local_addresses():
            raise HostAddressError(
                f"{HOST_ADDRESS_VAR}={explicit} is not an address of this host (its "
                f"interfaces have {', '.join(sorted(local_addresses())) or 'none'})"
            )
        return address
    tried = []
    for url in servers:
        host = url_host(url)
        if host is None:
            continue
        tried.append(host)
        routed = route_source_address(host)
        if routed is not None:
            return routed
    raise HostAddressError(
        f"{HOST_ADDRESS_VAR} is unset and no route to {', '.join(tried) or 'the master'} "
        "was found to derive it: set it to the address other hosts reach this one on"
    )


def socket_ifname_environment(
    address: str, *user_environments: Mapping[str, str]
) -> dict[str, str]:
    """``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME`` for the interface owning ``address``,
    leaving out each one any of ``user_environments`` sets (the user's choice wins); {} when
    no interface owns ``address``."""
    name = interface_of(address)
    if name is None:
        return {}
    return {var: name for var in IFNAME_VARS if not any(var in env for env in user_environments)}


def _normal(address: str) -> str:
    """``address`` in canonical text form (``::FFFF:1`` style spellings made comparable)."""
    return str(ipaddress.ip_address(address.split("%", 1)[0]))
