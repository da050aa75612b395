"""Where the master may send its own HTTP requests to a URL someone typed (no SSRF).

Two rules, shared by the places that call out: an endpoint an administrator listed (a set of
``config.storage_locations.normalize_endpoint`` keys, the format of
``HEADWAY_STORAGE_ENDPOINTS``) is always allowed; any other URL must be http(s), without
credentials, and every address its host resolves to must be global (not loopback, private,
link-local such as the cloud metadata service at 169.254.169.254, multicast, reserved or
unspecified). Storage endpoints use only the first rule (the registry signs S3 requests with
its credentials there: ``registry.storage_endpoints``); webhooks use both
(``webhooks.targets``), and check again before each request, so a name that later resolves to
a private address is refused then too.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from config.storage_locations import normalize_endpoint, url_origin


def endpoint_keys(urls: Iterable[str]) -> set[tuple[str, str, int]]:
    """The ``(scheme, host, port)`` keys of an administrator's endpoint list (entries that are
    not an http(s) endpoint are left out: settings documents the format)."""
    return {key for key in map(normalize_endpoint, urls) if key is not None}


def address_error(host: str, port: int) -> str | None:
    """Why ``host`` must not be called (it resolves to a non-global address, or not at all);
    None when every address it resolves to is global."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return f"{host!r} does not resolve ({exc})"
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not address.is_global or address.is_multicast:
            return (
                f"{host!r} resolves to {address}, a loopback, private, link-local or reserved "
                "address the master does not call"
            )
    return None


def outbound_url_error(url: object, *, allowed: set[tuple[str, str, int]]) -> str | None:
    """Why the master must not send a request to ``url``, or None when it may: an endpoint in
    ``allowed`` (``endpoint_keys`` of the administrator's list), else an http(s) URL whose host
    resolves to global addresses only (``address_error``)."""
    if not isinstance(url, str) or not url:
        return "must be a URL string"
    origin = url_origin(url)
    if origin is None:
        return f"{url!r} is not an http(s) URL with a host (and no credentials or fragment)"
    if origin in allowed:
        return None
    return address_error(origin[1], origin[2])
