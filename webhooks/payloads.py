"""The bodies a webhook receives: the event as JSON (``default``) or a Slack incoming-webhook
message (``slack``: ``{"text": ...}``, Slack's mrkdwn links ``<url|label>``).

An event is ``{"id": <uuid>, "type": <EventType>, "created_at": <ISO 8601>, "data": {...}}``;
``data`` per type is in docs/webhooks.md. Both formats carry the event id in the
``Headway-Event-Id`` header as well.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings
from django.urls import reverse

from webhooks.models import TEST_EVENT, EventType, PayloadFormat


def dashboard_url(name: str, *args: Any) -> str:
    """The absolute dashboard URL of route ``dashboard:<name>`` (``HEADWAY_MASTER_URL`` first)."""
    return settings.HEADWAY_MASTER_URL.rstrip("/") + reverse(f"dashboard:{name}", args=args)


def _escape(text: object) -> str:
    """Slack's three control characters escaped (its "Escaping text" rule), so a name cannot
    open a link or a mention."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_text(event: dict[str, Any]) -> str:
    data, kind = event["data"], event["type"]
    link = f"<{data['url']}|{{}}>" if data.get("url") else "{}"
    if kind == EventType.EXPERIMENT_STATE_CHANGED:
        exp = data["experiment"]
        what = link.format(f"Experiment {exp['id']} ({_escape(exp['name'])})")
        return f"{what}: {data['previous_state']} → *{data['state']}*"
    if kind == EventType.TRIAL_STATE_CHANGED:
        trial = data["trial"]
        what = link.format(f"Trial {trial['id']} of experiment {trial['experiment_id']}")
        return f"{what}: {data['previous_state']} → *{data['state']}*"
    if kind == EventType.CHECKPOINT_COMPLETED:
        ckpt = data["checkpoint"]
        what = link.format(f"trial {ckpt['trial_id']}")
        return (
            f"Checkpoint `{ckpt['uuid']}` of {what} completed at step {ckpt['steps_completed']}"
            f" ({ckpt['size']} bytes)"
        )
    if kind == EventType.MODEL_VERSION_CREATED:
        model = link.format(f"model {data['model']}")
        return f"Version {data['version']} of {model} registered (checkpoint `{data['checkpoint_uuid']}`)"
    if kind == EventType.MODEL_ALIAS_MOVED:
        model = link.format(data["model"])
        before = f" (was version {data['from_version']})" if data["from_version"] else ""
        return f"Alias {model}@{data['alias']} → version {data['to_version']}{before}"
    if kind == TEST_EVENT:
        return f"Test message from Headway for webhook {data['webhook']}"
    return f"Headway event {kind}"


def render(event: dict[str, Any], fmt: str) -> str:
    """The body of ``event`` in format ``fmt`` (``PayloadFormat``), as the text to send."""
    if fmt == PayloadFormat.SLACK:
        return orjson.dumps({"text": _slack_text(event)}).decode()
    return orjson.dumps(event).decode()
