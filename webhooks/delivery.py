"""Sending deliveries: claim under a row lock, POST (signed, no redirects), finish with one
conditional UPDATE; retries with exponential back-off; the periodic sweep.

Semantics (docs/webhooks.md, docs/decisions/operations.md): a delivery is claimed by one worker
at a time (``SELECT ... FOR UPDATE SKIP LOCKED`` then a conditional UPDATE to SENDING, which
also holds on SQLite where row locks do not exist) and is marked DELIVERED once a 2xx arrives;
it is never sent again after that. A response lost on its way back (a timeout after the
receiver acted, a worker killed mid-request) cannot be told from a request that never arrived,
so the delivery is sent again: at-least-once, with the event's stable id in
``Headway-Event-Id`` for the receiver to drop the repeat.

Retry policy: attempt ``n`` (1-based) failing is retried after
``HEADWAY_WEBHOOK_RETRY_SECONDS * 2**(n-1)`` seconds (capped at one hour) until
``HEADWAY_WEBHOOK_MAX_ATTEMPTS`` attempts; then the delivery is FAILED, its last status and
error kept.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

import requests
from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webhooks.models import Delivery, DeliveryState
from webhooks.signing import EVENT_ID_HEADER, EVENT_TYPE_HEADER, HEADER, signature
from webhooks.targets import url_error

log = logging.getLogger(__name__)

DELIVER_TASK = "headway.webhook_deliver"
MAX_BACKOFF_SECONDS = 3600.0
# How many due deliveries one sweep sends tasks for (the next sweep takes the rest).
SWEEP_BATCH = 500
USER_AGENT = "Headway-Webhooks/1"
# How much of a failed answer's body is kept in ``last_error``.
ERROR_BODY_BYTES = 500


def send_task(delivery_id: int, countdown: float | None = None) -> None:
    """Send ``headway.webhook_deliver(delivery_id)`` to the master worker's queue."""
    current_app.send_task(
        DELIVER_TASK,
        args=[delivery_id],
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        countdown=countdown,
    )


def backoff_seconds(attempts: int) -> float:
    """Seconds to wait after failed attempt number ``attempts`` (1-based): exponential from
    ``HEADWAY_WEBHOOK_RETRY_SECONDS``, capped at ``MAX_BACKOFF_SECONDS``."""
    base = settings.HEADWAY_WEBHOOK_RETRY_SECONDS
    return float(min(MAX_BACKOFF_SECONDS, base * 2 ** max(0, attempts - 1)))


def claim(delivery_id: int) -> Delivery | None:
    """Claim a due PENDING delivery for one attempt: SENDING, ``attempts`` + 1, a claim that
    lasts the request's timeout plus a margin. None when it is not due, not PENDING, or
    another worker holds it (skipped, not waited for)."""
    now = timezone.now()
    timeout = settings.HEADWAY_WEBHOOK_TIMEOUT_SECONDS
    with transaction.atomic():
        row = (
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(id=delivery_id, state=DeliveryState.PENDING, next_attempt_at__lte=now)
            .first()
        )
        if row is None:
            return None
        # Conditional: where the database has no row locks (SQLite), two claims may both have
        # read the row; exactly one of them changes it.
        claimed = Delivery.objects.filter(
            id=row.pk, state=DeliveryState.PENDING, attempts=row.attempts
        ).update(
            state=DeliveryState.SENDING,
            attempts=row.attempts + 1,
            last_attempt_at=now,
            claimed_until=now + timedelta(seconds=2 * timeout + 30),
        )
        if claimed != 1:
            return None
    return Delivery.objects.select_related("webhook").filter(id=delivery_id).first()


@dataclass(frozen=True)
class Outcome:
    """One attempt's result: ``status`` (HTTP status, None without an answer) and ``error``."""

    status: int | None
    error: str

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def post(delivery: Delivery) -> Outcome:
    """POST the delivery's body to its webhook's URL once: the URL checked again first (a name
    may resolve elsewhere now), signed, redirects not followed (a 3xx is a failure: its target
    was never checked), bounded by ``HEADWAY_WEBHOOK_TIMEOUT_SECONDS``."""
    hook = delivery.webhook
    refused = url_error(hook.url)
    if refused is not None:
        return Outcome(None, f"refused: {refused}")
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        EVENT_ID_HEADER: str(delivery.event_id),
        EVENT_TYPE_HEADER: delivery.event_type,
        HEADER: signature(hook.secret, body, int(time.time())),
    }
    timeout = settings.HEADWAY_WEBHOOK_TIMEOUT_SECONDS
    try:
        # stream: the answer's body is never read beyond what the error message keeps, however
        # much the receiver sends.
        response = requests.post(
            hook.url,
            data=body,
            headers=headers,
            timeout=(timeout, timeout),
            allow_redirects=False,
            stream=True,
        )
        with response:
            if 200 <= response.status_code < 300:
                return Outcome(response.status_code, "")
            head = response.raw.read(ERROR_BODY_BYTES, decode_content=True) or b""
            text = head.decode("utf-8", "replace")
            return Outcome(response.status_code, f"HTTP {response.status_code}: {text}")
    except (requests.RequestException, OSError) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}"[:2000])


def finish(delivery: Delivery, outcome: Outcome) -> Delivery | None:
    """Record an attempt's ``outcome`` on the SENDING ``delivery`` (still this attempt's:
    a conditional UPDATE), and schedule the retry or give up; return the row as stored (None
    once deleted)."""
    now = timezone.now()
    fields: dict[str, object] = {
        "last_status_code": outcome.status,
        "last_error": outcome.error,
        "claimed_until": None,
    }
    retry_in: float | None = None
    if outcome.ok:
        fields.update(state=DeliveryState.DELIVERED, delivered_at=now)
    elif delivery.attempts >= settings.HEADWAY_WEBHOOK_MAX_ATTEMPTS:
        fields.update(state=DeliveryState.FAILED)
        log.warning(
            "webhook %s: %s gave up after %d attempts",
            delivery.webhook_id,
            delivery,
            delivery.attempts,
        )
    else:
        retry_in = backoff_seconds(delivery.attempts)
        fields.update(
            state=DeliveryState.PENDING, next_attempt_at=now + timedelta(seconds=retry_in)
        )
    Delivery.objects.filter(
        id=delivery.pk, state=DeliveryState.SENDING, attempts=delivery.attempts
    ).update(**fields)
    if retry_in is not None:
        try:
            send_task(delivery.pk, countdown=retry_in)
        except Exception:  # the broker is down: the sweep sends it when it is due
            log.warning("webhook retry of %s not queued; the sweep will", delivery, exc_info=True)
    # None when the webhook (and so the delivery) was deleted meanwhile.
    return Delivery.objects.select_related("webhook").filter(id=delivery.pk).first()


def deliver(delivery_id: int) -> Delivery | None:
    """One attempt at a delivery, if it is due and nobody else holds it (the task's body); the
    delivery after it, or None when no attempt was made."""
    delivery = claim(delivery_id)
    if delivery is None:
        return None
    return finish(delivery, post(delivery))


def sweep() -> int:
    """Put back SENDING deliveries whose claim expired (their worker died mid-request: the
    attempt counts), then send a task for each due PENDING delivery (one whose task was lost
    with the broker, or never sent); return how many tasks were sent."""
    now = timezone.now()
    expired = Delivery.objects.filter(state=DeliveryState.SENDING, claimed_until__lt=now)
    expired.filter(attempts__gte=settings.HEADWAY_WEBHOOK_MAX_ATTEMPTS).update(
        state=DeliveryState.FAILED, claimed_until=None, last_error="worker lost mid-request"
    )
    expired.update(
        state=DeliveryState.PENDING,
        claimed_until=None,
        next_attempt_at=now,
        last_error="worker lost mid-request",
    )
    due = Delivery.objects.filter(state=DeliveryState.PENDING, next_attempt_at__lte=now)
    ids = list(due.order_by("next_attempt_at").values_list("id", flat=True)[:SWEEP_BATCH])
    for delivery_id in ids:
        send_task(delivery_id)
    return len(ids)
