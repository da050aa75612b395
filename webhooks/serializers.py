"""Input of ``/api/v1/webhooks/``: unknown fields refused (``StrictSerializer``: a 400 naming
them), the URL checked against the SSRF rules (``webhooks.targets``), event types and formats
from their fixed lists, ``workspace`` an existing workspace's id or name (or null)."""

from __future__ import annotations

import secrets
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from registry.api.model_serializers import StrictBooleanField, StrictCharField, StrictSerializer
from registry.models import Workspace
from webhooks.models import EventType, PayloadFormat, Webhook
from webhooks.targets import url_error

SECRET_MIN, SECRET_MAX = 16, 128


def new_secret() -> str:
    """A signing secret drawn when the admin gives none (256 bits, URL-safe text)."""
    return "whsec_" + secrets.token_urlsafe(32)


@extend_schema_field(
    {"oneOf": [{"type": "integer", "minimum": 1}, {"type": "string"}], "nullable": True}
)
class WorkspaceRefField(serializers.Field):
    """A workspace named by its id (a JSON integer) or its name (a JSON string); null: no
    workspace. Archived workspaces count (their experiments still change state). The
    validated value is the ``Workspace`` or None."""

    default_error_messages: ClassVar[dict[str, Any]] = {
        "type": "Must be a workspace's id (an integer) or name (a string), or null.",
        "unknown": "No workspace {ref}.",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)

    def to_internal_value(self, data: Any) -> Workspace:
        if isinstance(data, bool) or not isinstance(data, (int, str)):
            self.fail("type")
        lookup = {"id": data} if isinstance(data, int) else {"name": data}
        # An id outside the column's range, or a name with a NUL (which PostgreSQL's text
        # refuses), cannot exist: refused before the query instead of failing it.
        possible = 0 < data < 2**63 if isinstance(data, int) else "\x00" not in data
        found = Workspace.objects.filter(**lookup).first() if possible else None
        if found is None:
            self.fail("unknown", ref=data if isinstance(data, int) else repr(data))
        return found

    def to_representation(self, value: Workspace) -> str:
        return value.name


class WebhookWriteSerializer(StrictSerializer):
    """Create (``name``, ``url``, ``events`` required) or update (``partial``) a webhook.
    ``workspace``: only that workspace's events (``WorkspaceRefField``; null or left out:
    every workspace's)."""

    name = StrictCharField(max_length=100, allow_blank=False)
    url = StrictCharField(max_length=2000, allow_blank=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices), min_length=1, max_length=16
    )
    format = serializers.ChoiceField(choices=PayloadFormat.choices, required=False)
    secret = StrictCharField(min_length=SECRET_MIN, max_length=SECRET_MAX, required=False)
    enabled = StrictBooleanField(required=False)
    workspace = WorkspaceRefField(required=False)

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
