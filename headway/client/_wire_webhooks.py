"""Wire models of the admins' webhooks (``/api/v1/webhooks/``; ``headway webhook``),
re-exported by ``headway.client._wire``."""

from __future__ import annotations

from datetime import datetime

from headway.client._wire import WireModel


class WebhookDelivery(WireModel):
    """One event sent (or being sent) to a webhook.

    Attributes:
        id (int): the delivery.
        event_id (str): the event's stable id (the ``Headway-Event-Id`` header: the same on
            every attempt, for the receiver to drop a repeat).
        event_type (str): e.g. ``experiment.state_changed``.
        state (str): PENDING (waiting for its next attempt), SENDING (in flight), DELIVERED
            (a 2xx arrived) or FAILED (gave up after the last attempt).
        attempts (int): attempts made so far.
        last_status_code (int | None): the last answer's HTTP status (None: no answer).
        last_error (str): why the last attempt failed (empty after a success).
        last_attempt_at, next_attempt_at, delivered_at, created_at (datetime | None): when.
    """

    id: int
    event_id: str
    event_type: str
    state: str
    attempts: int
    last_status_code: int | None = None
    last_error: str = ""
    last_attempt_at: datetime | None = None
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    created_at: datetime


class WebhookInfo(WireModel):
    """A webhook as an admin sees it (never its secret, except in ``WebhookCreated``).

    Attributes:
        id (int), name (str): the webhook.
        url (str): where events are POSTed.
        events (list[str]): the event types it receives.
        format (str): ``default`` (the event as JSON) or ``slack`` (``{"text": ...}``).
        enabled (bool): False: no new event is recorded for it.
        workspace (str | None), workspace_id (int | None): it receives only this workspace's
            events (None: every workspace's).
        created_by (str | None), created_at (datetime): who made it, when.
        last_delivery (WebhookDelivery | None): its newest delivery.
    """

    id: int
    name: str
    url: str
    events: list[str]
    format: str
    enabled: bool
    workspace: str | None = None
    workspace_id: int | None = None
    created_by: str | None = None
    created_at: datetime
    last_delivery: WebhookDelivery | None = None


class WebhookCreated(WebhookInfo):
    """``POST webhooks/``: the new webhook with its signing ``secret`` (shown only here)."""

    secret: str


class WebhookList(WireModel):
    """Every webhook, oldest first."""

    webhooks: list[WebhookInfo]


class WebhookDeliveryList(WireModel):
    """A webhook's deliveries, newest first (at most ``limit``)."""

    deliveries: list[WebhookDelivery]
