"""Which URLs a webhook may target: ``config.outbound``'s rules (the storage endpoints' parsing
and allow-list format), with the administrator's exceptions in ``HEADWAY_WEBHOOK_ENDPOINTS``."""

from __future__ import annotations

from django.conf import settings

from config.outbound import endpoint_keys, outbound_url_error
from registry.errors import InvalidInput


def url_error(url: object) -> str | None:
    """Why the master must not POST to ``url`` (a private or loopback address, not http(s),
    credentials in it ...), or None; ``HEADWAY_WEBHOOK_ENDPOINTS`` lists the exceptions."""
    return outbound_url_error(url, allowed=endpoint_keys(settings.HEADWAY_WEBHOOK_ENDPOINTS))


def check_url(url: object, field: str = "url") -> None:
    """Raise ``InvalidInput`` naming ``field`` when ``url_error(url)`` says why not."""
    error = url_error(url)
    if error is not None:
        raise InvalidInput({field: [error]})
