"""``record``: an event becomes one PENDING delivery per enabled webhook that subscribes to it
(and has no workspace filter, or the event's workspace), written in the caller's transaction (the outbox: an event is committed exactly when the change
that caused it is, and a broker outage loses nothing), then sent once that commits."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from webhooks.models import Delivery, Webhook
from webhooks.payloads import render

log = logging.getLogger(__name__)


def _no_workspace() -> int | None:
    return None


def record(
    event_type: str,
    data: dict[str, Any],
    *,
    workspace: Callable[[], int | None] = _no_workspace,
    only: Webhook | None = None,
    send: bool = True,
) -> list[Delivery]:
    """Record event ``event_type`` with ``data`` for every enabled webhook subscribed to it
    whose workspace filter lets it through (``only``: for that webhook alone, whatever it
    subscribes to: the test action); return the deliveries (none when no webhook wants it:
    one query). ``send=False``: no task is sent (the caller delivers them itself).

    ``workspace`` returns the id of the event's workspace (None: it belongs to none, and only
    webhooks without a workspace filter receive it); it is called only when a subscribed
    webhook has a filter, so events nobody filters cost no extra query.

    Call it inside the transaction of the change; the deliveries' tasks are sent when it
    commits (``transaction.on_commit``, robust: a broker outage is logged, and the sweep,
    ``webhooks.delivery.sweep``, sends what was never sent).
    """
    hooks = (
        [only]
        if only is not None
        else [h for h in Webhook.objects.filter(enabled=True) if event_type in h.events]
    )
    if only is None and any(h.workspace_id is not None for h in hooks):
        where = workspace()
        hooks = [h for h in hooks if h.workspace_id is None or h.workspace_id == where]
    if not hooks:
        return []
    event_id = uuid.uuid4()
    event = {
        "id": str(event_id),
        "type": event_type,
        "created_at": timezone.now().isoformat(),
        "data": data,
    }
    rows = Delivery.objects.bulk_create(
        Delivery(
            webhook=hook, event_id=event_id, event_type=event_type, body=render(event, hook.format)
        )
        for hook in hooks
    )
    if send:
        ids = [row.pk for row in rows]
        transaction.on_commit(lambda: _send_tasks(ids), robust=True)
    return rows


def _send_tasks(ids: list[int]) -> None:
    from webhooks.delivery import send_task

    for delivery_id in ids:
        send_task(delivery_id)
