"""Two kinds of request wait their turn; heartbeats, lease renewals and controls never do.

A web worker process lends at most ``HEADWAY_DB_POOL_MAX_SIZE`` database connections
(``config.database``) and runs its requests' Python under one interpreter lock. Dashboard pages
and chart data are the heavy requests: 50 readers in a loop held every pooled connection, and
host heartbeats queued for one behind them (a lease renewal that waits past the lease is a run
re-placed for nothing). And a process runs one thread's Python at a time: a heartbeat takes the
interpreter lock back after each of its queries, behind every other request that is running,
so what decides its wait is how many requests run at once, not how many arrived. So a process
runs at most ``HEADWAY_WEB_MAX_READS`` reads at once (GET/HEAD outside the routes below) and at
most ``HEADWAY_WEB_MAX_REPORTS`` metric reports (a trial's ``POST trials/{id}/metrics/``,
MLflow's ``log-batch`` and ``log-metric``), and while a report waits for its turn no read
starts beside a running one (``Turns``: trials' data before dashboards, whose reads are the
heavier). The next one of a kind waits for one of its kind to finish, blocked on a condition
(not runnable, so not taking turns at the interpreter), up to ``WAIT_SECONDS``, then is
answered 503 with ``Retry-After`` (the SDK resends it: a report is stored once whatever number
of times it is sent; the dashboard's chart fetches retry too).
Everything else passes at once and finds connections free: the pool's
``RESERVED_CONNECTIONS`` are never taken by reads or reports.

Never counted as reads: the host agent's routes (``/api/v1/host-agent/``: heartbeats, claims,
preemption long-polls, logs), unmanaged runs' heartbeats, trials' preemption long-polls (a
long-poll waits on one shared watcher thread, not on a connection), and health checks. The
same idea as Determined's master, which answers agents over a connection of their own and never
queues them behind the web UI's API calls.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.database import RETRY_AFTER_SECONDS

# Pooled connections per process that reads and reports never take (heartbeats, renewals).
RESERVED_CONNECTIONS = 4
# Reads at once per process by default: 50 readers against 50 trials on PostgreSQL
# (bench/overload.py, docs/performance.md) left the trials' heartbeat p99 where it was without
# readers with 4, and made it 4x longer with 12; the readers' throughput was within 12%.
DEFAULT_MAX_READS = 4
# Metric reports at once per process by default (bench/overload.py, docs/performance.md).
DEFAULT_MAX_REPORTS = 8
# How long a read waits for its turn before the 503: about the pool's own wait.
WAIT_SECONDS = 10.0
DETAIL = "The server is busy with other requests of this kind; retry after a few seconds."

_NOT_READS = re.compile(
    r"^/(healthz|metrics|api/v1/health/|api/v1/host-agent/|static/"
    r"|api/v1/trials/\d+/preempt/|api/v1/unmanaged/.*/heartbeat/)"
)
_REPORTS = re.compile(r"^/api/(v1/trials/\d+/metrics/|2\.0/mlflow/runs/log-(batch|metric))$")


def _turns(setting: str, default: int, pool_share: Callable[[int], int]) -> int:
    """``setting`` when set (at least 1), else ``default`` capped by ``pool_share(pool size)``
    (at least 1) when connections are pooled."""
    given: int | None = getattr(settings, setting, None)
    if given is not None:
        if given < 1:
            raise ImproperlyConfigured(f"{setting} must be 1 or more, got {given}")
        return given
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        return max(1, min(default, pool_share(int(pool["max_size"]))))
    return default


def max_reads() -> int:
    """Reads at once per process: ``HEADWAY_WEB_MAX_READS``, else ``DEFAULT_MAX_READS`` or,
    when the pool is smaller, the pool's size less ``RESERVED_CONNECTIONS`` (at least 1).

    Raises:
        ImproperlyConfigured: ``HEADWAY_WEB_MAX_READS`` below 1.
    """
    return _turns(
        "HEADWAY_WEB_MAX_READS", DEFAULT_MAX_READS, lambda size: size - RESERVED_CONNECTIONS
    )


def max_reports() -> int:
    """Metric reports at once per process: ``HEADWAY_WEB_MAX_REPORTS``, else
    ``DEFAULT_MAX_REPORTS``; with a pool, at most the pool's size less ``RESERVED_CONNECTIONS``
    and the reads' turns (at least 1).

    Raises:
        ImproperlyConfigured: ``HEADWAY_WEB_MAX_REPORTS`` (or ``HEADWAY_WEB_MAX_READS``) below 1.
    """
    return _turns(
        "HEADWAY_WEB_MAX_REPORTS",
        DEFAULT_MAX_REPORTS,
        lambda size: size - RESERVED_CONNECTIONS - max_reads(),
    )


def is_report(request: HttpRequest) -> bool:
    """True for a metric report (see the module docstring)."""
    return request.method == "POST" and bool(_REPORTS.match(request.path))


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


READ, REPORT = "read", "report"


class Turns:
    """One process's turns for reads and reports; reports come first.

    At most ``reads`` reads and ``reports`` reports run at once. While a report waits for a
    turn, reads are held to one at a time (those running finish; no new one starts beside a
    running read), so under overload the trials' reports get the interpreter and the pool the
    dashboard's reads would take, and the dashboard still gets one read at a time.
    """

    def __init__(self, reads: int, reports: int) -> None:
        self._limits = {READ: reads, REPORT: reports}
        self._running = {READ: 0, REPORT: 0}
        self._waiting = {READ: 0, REPORT: 0}
        self._lock = threading.Lock()
        self._freed = {
            READ: threading.Condition(self._lock),
            REPORT: threading.Condition(self._lock),
        }

    def waiting(self, kind: str) -> int:
        """Requests of ``kind`` waiting for a turn now."""
        return self._waiting[kind]

    def _may_start(self, kind: str) -> bool:
        limit = self._limits[kind]
        if kind == READ and self._waiting[REPORT]:
            limit = min(limit, 1)
        return self._running[kind] < limit

    def acquire(self, kind: str, timeout: float) -> bool:
        """Take a turn of ``kind`` (``READ`` or ``REPORT``), waiting at most ``timeout``
        seconds; False when none was free by then."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._waiting[kind] += 1
            try:
                while not self._may_start(kind):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._freed[kind].wait(left)
                self._running[kind] += 1
                return True
            finally:
                self._waiting[kind] -= 1
                if kind == REPORT and not self._waiting[REPORT]:
                    # Reads may have all their turns again.
                    self._freed[READ].notify(self._limits[READ])

    def release(self, kind: str) -> None:
        """Give back a turn of ``kind`` taken by ``acquire``."""
        with self._lock:
            self._running[kind] -= 1
            self._freed[kind].notify()


class AdmissionMiddleware:
    """At most ``max_reads()`` reads and ``max_reports()`` metric reports run at once in this
    process, reports first (``Turns``; taken before the session and the user are loaded, so all
    of a request's queries are inside its turn); everything else passes at once."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.turns = Turns(max_reads(), max_reports())

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_read(request):
            kind = READ
        elif is_report(request):
            kind = REPORT
        else:
            return self.get_response(request)
        if not self.turns.acquire(kind, WAIT_SECONDS):
            return busy_response(request)
        try:
            return self.get_response(request)
        finally:
            self.turns.release(kind)
