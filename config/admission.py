"""Reads wait their turn; heartbeats, lease renewals and writes never wait behind them.

A web worker process lends at most ``HEADWAY_DB_POOL_MAX_SIZE`` database connections
(``config.database``) and runs its requests' Python under one interpreter lock. Dashboard pages
and chart data are the heavy requests: 50 readers in a loop held every pooled connection, and
host heartbeats queued for one behind them (a lease renewal that waits past the lease is a run
re-placed for nothing). And a process runs one thread's Python at a time: a heartbeat takes the
interpreter lock back after each of its queries, behind every read that is running. So a process
runs at most ``HEADWAY_WEB_MAX_READS`` reads at once (GET/HEAD outside the routes below); the
next read waits for one to finish, up to
``WAIT_SECONDS``, then is answered 503 with ``Retry-After`` (the SDK and the dashboard's chart
fetches retry it). Everything else passes at once and finds connections free: the pool's
``RESERVED_CONNECTIONS`` are never taken by reads.

Never counted as reads: the host agent's routes (``/api/v1/host-agent/``: heartbeats, claims,
preemption long-polls, logs), unmanaged runs' heartbeats, trials' preemption long-polls (a
long-poll waits on one shared watcher thread, not on a connection), and health checks. The
same idea as Determined's master, which answers agents over a connection of their own and never
queues them behind the web UI's API calls.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse

from registry.overload import RETRY_AFTER_SECONDS

# Pooled connections per process that reads never take (heartbeats, renewals, reports).
RESERVED_CONNECTIONS = 4
# Reads at once per process by default: 50 readers against 50 trials on PostgreSQL
# (bench/overload.py, docs/performance.md) left the trials' heartbeat p99 where it was without
# readers with 4, and made it 4x longer with 12; the readers' throughput was within 12%.
DEFAULT_MAX_READS = 4
# How long a read waits for its turn before the 503: about the pool's own wait.
WAIT_SECONDS = 10.0
DETAIL = "The server is busy with other reads; retry after a few seconds."

_NOT_READS = re.compile(
    r"^/(healthz|metrics|api/v1/health/|api/v1/host-agent/|static/"
    r"|api/v1/trials/\d+/preempt/|api/v1/unmanaged/.*/heartbeat/)"
)


def max_reads() -> int:
    """Reads at once per process: ``HEADWAY_WEB_MAX_READS``, else ``DEFAULT_MAX_READS`` or,
    when the pool is smaller, the pool's size less ``RESERVED_CONNECTIONS`` (at least 1).

    Raises:
        ImproperlyConfigured: ``HEADWAY_WEB_MAX_READS`` below 1.
    """
    given: int | None = getattr(settings, "HEADWAY_WEB_MAX_READS", None)
    if given is not None:
        if given < 1:
            raise ImproperlyConfigured(f"HEADWAY_WEB_MAX_READS must be 1 or more, got {given}")
        return given
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        return max(1, min(DEFAULT_MAX_READS, int(pool["max_size"]) - RESERVED_CONNECTIONS))
    return DEFAULT_MAX_READS


def is_read(request: HttpRequest) -> bool:
    """True for a request that waits its turn (see the module docstring)."""
    return request.method in ("GET", "HEAD") and not _NOT_READS.match(request.path)


def busy_response(request: HttpRequest) -> HttpResponse:
    """503 with ``Retry-After``: JSON in the API's error shape under ``/api/``, text elsewhere."""
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": DETAIL, "errors": {}}, status=503)
    else:
        response = HttpResponse(
            f"503 Service Unavailable\n\n{DETAIL}\n", status=503, content_type="text/plain"
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class ReadAdmissionMiddleware:
    """At most ``max_reads()`` reads run at once in this process (a semaphore taken before
    the session and the user are loaded, so all of a read's queries are inside it)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.limit = max_reads()
        self._turns = threading.BoundedSemaphore(self.limit)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_read(request):
            return self.get_response(request)
        if not self._turns.acquire(timeout=WAIT_SECONDS):
            return busy_response(request)
        try:
            return self.get_response(request)
        finally:
            self._turns.release()
