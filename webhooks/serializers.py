"""Input of ``/api/v1/webhooks/``: unknown fields refused (``StrictSerializer``: a 400 naming
them), the URL checked against the SSRF rules (``webhooks.targets``), event types and formats
from their fixed lists, ``workspace`` an existing workspace's id or name (or null)."""

from __future__ import annotations

import secrets
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from registry.api.model_serializers import (
    WORKSPACE_REF_SCHEMA,
    StrictBooleanField,
    StrictCharField,
    StrictSerializer,
    WorkspaceRefField,
)
from registry.models import Workspace
from webhooks.models import EventType, PayloadFormat, Webhook
from webhooks.targets import url_error

SECRET_MIN, SECRET_MAX = 16, 128


def new_secret() -> str:
    """A signing secret drawn when the admin gives none (256 bits, URL-safe text)."""
    return "whsec_" + secrets.token_urlsafe(32)


@extend_schema_field({**WORKSPACE_REF_SCHEMA, "nullable": True})
class WebhookWorkspaceField(WorkspaceRefField):
    """``WorkspaceRefField`` (an id or a name, checked there) resolved to the ``Workspace``;
    null: no workspace. Any workspace counts, archived ones too (their experiments still change
    state), whatever the caller's roles (webhooks are site admins')."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)

    def to_internal_value(self, data: Any) -> Workspace:  # type: ignore[override]  # resolved
        ref = super().to_internal_value(data)
        lookup = {"id": ref} if isinstance(ref, int) else {"name": ref}
        found = Workspace.objects.filter(**lookup).first()
        if found is None:
            raise serializers.ValidationError(
                f"No workspace {ref if isinstance(ref, int) else repr(ref)}."
            )
        return found

    def to_representation(self, value: Workspace) -> str:
        return value.name


class WebhookWriteSerializer(StrictSerializer):
    """Create (``name``, ``url``, ``events`` required) or update (``partial``) a webhook.
    ``workspace``: only that workspace's events (``WebhookWorkspaceField``; null or left out:
    every workspace's)."""

    name = StrictCharField(max_length=100, allow_blank=False)
    url = StrictCharField(max_length=2000, allow_blank=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices), min_length=1, max_length=16
    )
    format = serializers.ChoiceField(choices=PayloadFormat.choices, required=False)
    secret = StrictCharField(min_length=SECRET_MIN, max_length=SECRET_MAX, required=False)
    enabled = StrictBooleanField(required=False)
    workspace = WebhookWorkspaceField(required=False)

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
