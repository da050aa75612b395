"""Shared by tests/registry/api/test_host_api*.py: host keys, a host's client and its heartbeat."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from headway.client import RegistryAPI, wire
from tests.helpers import _default_pool


def issue_key(name: str) -> str:
    """A live host key for ``name`` (as the management command issues it)."""
    from registry.lifecycle.host_tokens import host_token_issue

    return host_token_issue(name, created_by=None)[1]


def host_queue(name: str) -> str:
    """The Celery queue host ``name`` registers (``<HEADWAY_QUEUE>.host.<name>``)."""
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}.host.{name}"


def beat(api: RegistryAPI, name: str, slots: int = 1, **extra) -> wire.HostInfo:
    """Register or heartbeat host ``name`` with ``slots`` CPU slots through the host routes."""
    return api.host_heartbeat(
        pool=_default_pool(),
        devices=[f"cpu{i}" for i in range(slots)],
        gpu=False,
        started_at=timezone.now(),
        **extra,
    )


def host_api(live_server, name: str) -> RegistryAPI:
    """A registered host ``name``'s client (a fresh key; few retries: errors come at once)."""
    api = RegistryAPI(live_server.url, issue_key(name))
    api.session.max_retries = 0
    beat(api, name)
    return api
