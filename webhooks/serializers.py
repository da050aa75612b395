"""Input of ``/api/v1/webhooks/``: unknown fields refused (``StrictSerializer``: a 400 naming
them, a ``workspace`` included, which does not exist yet), the URL checked against the SSRF
rules (``webhooks.targets``), event types and formats from their fixed lists."""

from __future__ import annotations

import secrets

from rest_framework import serializers

from registry.api.model_serializers import StrictBooleanField, StrictCharField, StrictSerializer
from webhooks.models import EventType, PayloadFormat, Webhook
from webhooks.targets import url_error

SECRET_MIN, SECRET_MAX = 16, 128


def new_secret() -> str:
    """A signing secret drawn when the admin gives none (256 bits, URL-safe text)."""
    return "whsec_" + secrets.token_urlsafe(32)


class WebhookWriteSerializer(StrictSerializer):
    """Create (``name``, ``url``, ``events`` required) or update (``partial``) a webhook."""

    name = StrictCharField(max_length=100, allow_blank=False)
    url = StrictCharField(max_length=2000, allow_blank=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices), min_length=1, max_length=16
    )
    format = serializers.ChoiceField(choices=PayloadFormat.choices, required=False)
    secret = StrictCharField(min_length=SECRET_MIN, max_length=SECRET_MAX, required=False)
    enabled = StrictBooleanField(required=False)

    def validate_url(self, url: str) -> str:
        error = url_error(url)
        if error is not None:
            raise serializers.ValidationError(error)
        return url

    def validate_events(self, events: list[str]) -> list[str]:
        return sorted(set(events))

    def validate_name(self, name: str) -> str:
        others = Webhook.objects.filter(name=name)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise serializers.ValidationError(f"A webhook named {name!r} exists.")
        return name


class DeliveryQuerySerializer(StrictSerializer):
    """``GET webhooks/{id}/deliveries/?limit=N`` (1-500, default 50)."""

    limit = serializers.IntegerField(min_value=1, max_value=500, required=False, default=50)
