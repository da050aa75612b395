"""Webhooks and their deliveries (the outbox).

A ``Webhook`` is an admin's URL with the events it wants, a payload format and a signing
secret. A ``Delivery`` is one event for one webhook: written in the transaction of the change
that caused the event (``webhooks.events.record``), then claimed, sent and finished by the
master's worker (``webhooks.delivery``).
"""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone


class EventType(models.TextChoices):
    """What a webhook may subscribe to (``Webhook.events``)."""

    EXPERIMENT_STATE_CHANGED = "experiment.state_changed"
    TRIAL_STATE_CHANGED = "trial.state_changed"
    CHECKPOINT_COMPLETED = "checkpoint.completed"
    MODEL_VERSION_CREATED = "model_version.created"
    MODEL_ALIAS_MOVED = "model_alias.moved"


# Sent by the test action only (``webhooks.delivery.send_test``), whatever a webhook subscribes to.
TEST_EVENT = "webhook.test"


class PayloadFormat(models.TextChoices):
    """``default``: the event as JSON; ``slack``: a Slack incoming-webhook ``{"text": ...}``."""

    DEFAULT = "default"
    SLACK = "slack"


class Webhook(models.Model):
    """An admin's webhook: ``url`` receives the ``events`` (``EventType`` values) it names,
    formatted as ``format`` and signed with ``secret`` (HMAC-SHA256, ``webhooks.signing``).

    ``workspace``: only events of that workspace (None: of every workspace, and the events that
    belong to no workspace).
    """

    name = models.CharField(max_length=100, unique=True)
    url = models.CharField(max_length=2000)
    events = models.JSONField(default=list)
    format = models.CharField(
        max_length=16, choices=PayloadFormat.choices, default=PayloadFormat.DEFAULT
    )
    secret = models.CharField(max_length=128)
    enabled = models.BooleanField(default=True)
    # PROTECT: a workspace is archived, never deleted; were it deleted, dropping the filter
    # would widen the webhook to every workspace's events.
    workspace = models.ForeignKey(
        "registry.Workspace",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["id"]

    def __str__(self) -> str:
        return f"webhook {self.name}"


class DeliveryState(models.TextChoices):
    """PENDING (waiting for its next attempt), SENDING (claimed by a worker: its request is in
    flight), DELIVERED (a 2xx arrived), FAILED (gave up after the last attempt)."""

    PENDING = "PENDING"
    SENDING = "SENDING"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"


class Delivery(models.Model):
    """One event for one webhook, with its attempts.

    ``body`` is the exact text sent (the same bytes on every attempt, so a receiver's
    signature check and dedupe by ``event_id`` see one event). ``claimed_until``: a SENDING
    row whose worker died is put back once this passes (the sweep).
    """

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.UUIDField()
    event_type = models.CharField(max_length=64)
    body = models.TextField()
    state = models.CharField(
        max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["-id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # One delivery per event and webhook: a recorded event is never queued twice.
            models.UniqueConstraint(fields=["webhook", "event_id"], name="webhook_event_once"),
        ]
        indexes: ClassVar[list[models.Index]] = [
            # The sweep's two scans: due PENDING rows and SENDING rows whose claim expired.
            models.Index(fields=["state", "next_attempt_at"], name="webhook_delivery_due"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.event_type} {self.event_id}"
