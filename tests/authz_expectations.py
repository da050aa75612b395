"""The authorization matrix's expectations: who may use each route, and the routes themselves.

``tests/registry/test_authorization_matrix.py`` runs every case; this module holds the table it checks
against (``API`` / ``DASHBOARD``: route -> kind of access) and the walk of the URL conf that
lists the routes, so a new route without an expectation fails naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

from dashboard.controls import BULK_ACTIONS, EXPERIMENT_CONTROLS, TRIAL_CONTROLS

PRINCIPALS = ("anonymous", "other", "owner", "admin", "this_run", "other_run", "ended_run")

# API kinds: who is allowed (everyone else: 401 without credentials, else 403).
PUBLIC = "public"  # no credentials needed (login)
READ = "read"  # logged-in users
READ_OWN_RUN = "read+own run"  # users, and this trial's run token
READ_ANY_RUN = "read+any run"  # users, and any live run token (checkpoints, models)
CREATE = "create"  # logged-in users create their own objects
OWNER = "owner"  # the owner or an admin
TRIAL_DATA = "trial data"  # the owner or this trial's run token
HOST_AGENT = "host agent"  # worker hosts' tokens only (users, admins and runs: 403)
ADMIN = "admin"  # admins only (host tokens, host operations)

# (route name, method) -> kind, for every route of registry/api/urls.py.
API: dict[tuple[str, str], str] = {
    ("api-root", "get"): READ,
    ("login", "post"): PUBLIC,
    ("health", "get"): READ,
    ("schema", "get"): READ,
    ("schema-ui", "get"): READ,
    ("experiment-list", "get"): READ,
    ("experiment-list", "post"): CREATE,
    ("experiment-detail", "get"): READ,
    ("experiment-detail", "delete"): OWNER,
    ("experiment-detail", "patch"): OWNER,
    ("experiment-activate", "post"): OWNER,
    ("experiment-pause", "post"): OWNER,
    ("experiment-cancel", "post"): OWNER,
    ("experiment-kill", "post"): OWNER,
    ("experiment-archive", "post"): OWNER,
    ("experiment-unarchive", "post"): OWNER,
    ("experiment-checkpoints", "get"): READ,
    ("experiment-checkpoints-gc", "post"): OWNER,
    ("experiment-metrics", "get"): READ,
    ("experiment-hparam-importance", "get"): READ,
    ("experiment-model-definition", "get"): READ,
    ("experiment-trials", "get"): READ,
    ("trial-list", "get"): READ,
    ("trial-detail", "get"): READ_OWN_RUN,
    ("trial-detail", "patch"): OWNER,
    ("trial-activate", "post"): OWNER,
    ("trial-pause", "post"): OWNER,
    ("trial-cancel", "post"): OWNER,
    ("trial-kill", "post"): OWNER,
    ("trial-continue-trial", "post"): OWNER,
    ("trial-checkpoints", "get"): READ_OWN_RUN,
    ("trial-checkpoints", "post"): TRIAL_DATA,
    ("trial-metrics", "get"): READ_OWN_RUN,
    ("trial-metrics", "post"): TRIAL_DATA,
    ("trial-metrics-csv", "get"): READ,
    ("trial-summary-metrics", "get"): READ_OWN_RUN,
    ("trial-logs", "get"): READ,
    ("trial-preempt", "get"): READ_OWN_RUN,
    ("trial-preempt-ack", "post"): TRIAL_DATA,
    ("trial-progress", "post"): TRIAL_DATA,
    ("trial-searcher-completed", "post"): TRIAL_DATA,
    ("trial-searcher-early-exit", "post"): TRIAL_DATA,
    ("checkpoint-detail", "get"): READ_ANY_RUN,
    ("checkpoint-detail", "delete"): OWNER,
    ("checkpoint-download", "get"): READ_ANY_RUN,
    ("checkpoint-metadata", "post"): TRIAL_DATA,
    ("worker-list", "get"): READ,
    ("worker-detail", "get"): READ,
    ("resource-pool-list", "get"): READ,
    ("model-list", "get"): READ_ANY_RUN,
    ("model-list", "post"): CREATE,
    ("model-detail", "get"): READ_ANY_RUN,
    ("model-detail", "patch"): OWNER,
    ("model-detail", "delete"): OWNER,
    ("model-version-list", "get"): READ_ANY_RUN,
    ("model-version-list", "post"): OWNER,
    ("model-version-detail", "get"): READ_ANY_RUN,
    ("model-version-detail", "patch"): OWNER,
    ("model-version-detail", "delete"): OWNER,
    ("model-alias-list", "get"): READ_ANY_RUN,
    ("model-alias-history", "get"): READ_ANY_RUN,
    ("model-alias-detail", "get"): READ_ANY_RUN,
    ("model-alias-detail", "put"): OWNER,
    ("model-alias-detail", "delete"): OWNER,
    ("model-alias-resolve", "get"): READ_ANY_RUN,
    # Workspaces and projects: users with a role there read them (404 without one); anyone
    # creates a workspace, editors projects; the workspace's admins (here: its owner) change it.
    ("workspace-list", "get"): READ,
    ("workspace-list", "post"): CREATE,
    ("workspace-detail", "get"): READ,
    ("workspace-detail", "patch"): OWNER,
    ("workspace-members", "get"): READ,
    ("workspace-members", "post"): OWNER,
    ("workspace-member", "delete"): OWNER,
    ("workspace-archive", "post"): OWNER,
    ("workspace-unarchive", "post"): OWNER,
    ("project-list", "get"): READ,
    ("project-list", "post"): CREATE,
    ("project-detail", "get"): READ,
    ("project-archive", "post"): OWNER,
    ("project-unarchive", "post"): OWNER,
    ("experiment-move", "post"): OWNER,
    # Worker hosts (registry/api/views/host_agent.py) and their tokens' management.
    ("host-heartbeat", "post"): HOST_AGENT,
    ("host-stopped", "post"): HOST_AGENT,
    ("host-run-claim", "post"): HOST_AGENT,
    ("host-run-running", "post"): HOST_AGENT,
    ("host-run-heartbeat", "post"): HOST_AGENT,
    ("host-run-preempt", "post"): HOST_AGENT,
    ("host-run-exit", "post"): HOST_AGENT,
    ("host-run-logs", "post"): HOST_AGENT,
    ("host-run-rendezvous", "post"): HOST_AGENT,
    ("host-share-claim", "post"): HOST_AGENT,
    ("host-share-running", "post"): HOST_AGENT,
    ("host-share-heartbeat", "post"): HOST_AGENT,
    ("host-share-logs", "post"): HOST_AGENT,
    ("host-share-exit", "post"): HOST_AGENT,
    ("host-run-spec", "get"): HOST_AGENT,
    ("host-run-model-definition", "get"): HOST_AGENT,
    ("host-run-token", "get"): HOST_AGENT,
    ("host-run-shares", "get"): HOST_AGENT,
    ("host-share-spec", "get"): HOST_AGENT,
    ("host-share-model-definition", "get"): HOST_AGENT,
    ("host-share-token", "get"): HOST_AGENT,
    ("host-share-rendezvous", "get"): HOST_AGENT,
    ("host-token-list", "get"): ADMIN,
    ("host-token-list", "post"): ADMIN,
    ("host-token-detail", "delete"): ADMIN,
    ("admin-host-list", "get"): ADMIN,
    ("admin-host-detail", "delete"): ADMIN,
    ("admin-host-disable", "post"): ADMIN,
    ("admin-host-enable", "post"): ADMIN,
    ("resource-pool-node-enable", "post"): ADMIN,
    ("webhook-list", "get"): ADMIN,
    ("webhook-list", "post"): ADMIN,
    ("webhook-detail", "get"): ADMIN,
    ("webhook-detail", "patch"): ADMIN,
    ("webhook-detail", "delete"): ADMIN,
    ("webhook-deliveries", "get"): ADMIN,
    ("webhook-test", "post"): ADMIN,
    # Unmanaged runs (core_v2): users start their own; the run's token or its owner beat/end it.
    ("unmanaged-start", "post"): CREATE,
    ("unmanaged-heartbeat", "post"): TRIAL_DATA,
    ("unmanaged-exit", "post"): TRIAL_DATA,
    ("unmanaged-logs", "post"): TRIAL_DATA,
    ("unmanaged-checkpoint-file", "put"): TRIAL_DATA,
}

# Dashboard route name -> (method, kind); READ / CREATE / OWNER as above (session logins only).
DASHBOARD: dict[str, tuple[str, str]] = {
    "experiments": ("get", READ),
    "experiments-live": ("get", READ),
    "experiments-bulk": ("post", OWNER),
    "experiment": ("get", READ),
    "experiment-live": ("get", READ),
    "experiment-files": ("get", READ),
    "experiment-trials": ("get", READ),
    "experiment-trials-data": ("get", READ),
    "experiment-trials-csv": ("get", READ),
    "experiment-trials-ids": ("get", READ),
    # Saved views: any reader saves their own; its owner or an admin deletes it.
    "experiment-view-save": ("post", CREATE),
    "list-view-save": ("post", CREATE),
    "view-delete": ("post", OWNER),
    "trial": ("get", READ),
    "trial-logs": ("get", READ),
    "trial-logs-download": ("get", READ),
    "workers": ("get", READ),
    "models": ("get", READ),
    "model-create": ("post", CREATE),
    "model-register": ("post", CREATE),
    "model": ("get", READ),
    "model-archive": ("post", OWNER),
    "model-version-delete": ("post", OWNER),
    "compare": ("get", READ),
    "experiment-control": ("post", OWNER),
    "trial-control": ("post", OWNER),
    "trial-continue": ("post", OWNER),
    "trial-menu": ("get", READ),
    "experiment-edit": ("post", OWNER),
    "experiment-notes": ("post", OWNER),
    "trial-notes": ("post", OWNER),
    "model-edit": ("post", OWNER),
    "model-version-edit": ("post", OWNER),
    "host-control": ("post", ADMIN),
    "workspaces": ("get", READ),
    "workspace": ("get", READ),
    "project": ("get", READ),
}


def _walk(patterns: list[Any], namespace: str | None = None) -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern) and namespace in ("registry-api", "dashboard"):
            yield f"{namespace}:{pattern.name}", pattern.callback


def _methods(callback: Any) -> list[str]:
    actions = getattr(callback, "actions", None)
    if actions:  # a DRF viewset route: {"get": "list", "post": "create"}
        return sorted(set(actions) - {"head", "options"})  # HEAD is GET
    cls = getattr(callback, "cls", None)
    if cls is not None:  # an APIView
        return sorted(m for m in ("get", "post", "put", "patch", "delete") if hasattr(cls, m))
    return []


def url_conf_routes() -> dict[str, list[str]]:
    """``{"namespace:name": [methods]}`` for every API and dashboard route (methods of
    dashboard function views come from ``DASHBOARD``)."""
    routes: dict[str, list[str]] = {}
    for name, callback in _walk(get_resolver().url_patterns):
        routes[name] = _methods(callback)
    return routes


def matrix_cases() -> list[tuple[str, str, str | None]]:
    """``(route, method, control action)`` for every route; dashboard controls once per action."""
    cases: list[tuple[str, str, str | None]] = []
    for route, methods in sorted(url_conf_routes().items()):
        namespace, name = route.split(":")
        if namespace == "registry-api":
            cases += [(route, method, None) for method in methods]
            continue
        method = DASHBOARD.get(name, ("get", "?"))[0]
        actions: list[str | None] = [None]
        if name == "experiment-control":
            actions = list(EXPERIMENT_CONTROLS)
        elif name == "trial-control":
            actions = list(TRIAL_CONTROLS)
        elif name == "experiments-bulk":
            actions = list(BULK_ACTIONS)
        elif name == "host-control":
            actions = ["enable", "drain", "disable", "remove"]
        cases += [(route, method, action) for action in actions]
    return cases


def route_kind(route: str, method: str) -> str | None:
    namespace, name = route.split(":")
    if namespace == "registry-api":
        return API.get((name, method))
    entry = DASHBOARD.get(name)
    return entry[1] if entry else None
