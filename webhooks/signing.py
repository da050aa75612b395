"""The webhook signature: ``Headway-Signature: t=<unix seconds>,v1=<hex>``, where ``<hex>`` is
HMAC-SHA256 with the webhook's secret over ``"<t>.<body>"`` (Stripe's scheme: the timestamp
inside the signed text lets a receiver refuse an old message replayed; docs/webhooks.md)."""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "Headway-Signature"
EVENT_ID_HEADER = "Headway-Event-Id"
EVENT_TYPE_HEADER = "Headway-Event-Type"


def signature(secret: str, body: bytes, timestamp: int) -> str:
    """The ``Headway-Signature`` value of ``body`` sent at ``timestamp`` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(
    secret: str, body: bytes, header: str, *, tolerance: float = 300, now: float | None = None
) -> bool:
    """True when ``header`` (a ``Headway-Signature`` value) signs ``body`` with ``secret`` and
    its timestamp is within ``tolerance`` seconds of ``now`` (default: this clock). What a
    receiver runs; docs/webhooks.md shows the same check standalone."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
