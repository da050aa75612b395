"""Prometheus metrics of the master (``GET /metrics``, docs/deployment.md "What to alert on").

Two kinds of series, both with the maintained ``prometheus_client`` library:

- **Request series**, counted by ``PrometheusMiddleware`` in every web process:
  ``headway_http_request_duration_seconds{method,route}`` (histogram) and
  ``headway_http_responses_total{method,status}``. gunicorn runs several worker processes
  (config/gunicorn.py), each with its own counters; under gunicorn they use prometheus_client's
  multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by config/gunicorn.py): each process
  writes its values to files in one folder and a scrape, answered by any process, sums them all.
  Without that variable (``runserver``, tests) they live in the process's default registry.
- **Cluster series**, computed at scrape time by ``ClusterCollector`` from the database and the
  health checks (``registry.health``), so every web process answers the same: component up,
  the master worker's beat age, queued runs and slots per resource pool, runs by state,
  heartbeat age and slots per host, and runs lost to an infrastructure failure (a counter read
  from the database, so it survives restarts and is the same from every process).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from registry.health import MASTER_WORKER, health_report
from registry.models import RunState, TrialRun, WorkerHost
from registry.scheduling import pool_summaries

logger = logging.getLogger("headway.prometheus")

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Up to the SDK's 60 s preemption long-poll (its route label tells it apart from the rest).
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
LIVE_RUN_STATES = (RunState.QUEUED, RunState.STARTING, RunState.RUNNING)

REQUEST_SECONDS = Histogram(
    "headway_http_request_duration_seconds",
    "Time from a request reaching Django to its response (streamed bodies: until the first "
    "byte), by method and route name (the URL pattern's name, 'unmatched' for none).",
    ["method", "route"],
    buckets=_BUCKETS,
)
RESPONSES = Counter(
    "headway_http_responses",
    "Responses by method and status code (503: overload or a dependency down, with Retry-After).",
    ["method", "status"],
)


class PrometheusMiddleware:
    """Counts every response and observes its latency (first in ``MIDDLEWARE``, so it sees the
    503s and 500s other middleware and the error handlers produce)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        status = 500  # Django answers exceptions itself; one escaping here is a 500
        try:
            response = self.get_response(request)
            status = response.status_code
            return response
        finally:
            method = request.method if request.method in _METHODS else "other"
            match = getattr(request, "resolver_match", None)
            route = (match.view_name or "unnamed") if match is not None else "unmatched"
            REQUEST_SECONDS.labels(method, route).observe(time.perf_counter() - start)
            RESPONSES.labels(method, str(status)).inc()


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class ClusterCollector:
    """Cluster series computed at scrape time: the health checks, then a few aggregate queries
    (pool summaries: three; runs by state, hosts, lost runs: one each). When the database is
    down only the health series are exported."""

    def collect(self) -> Iterator[Metric]:
        report = health_report()
        up = _gauge(
            "headway_component_up",
            "1 when the component's health check passes (GET /api/v1/health/), else 0.",
            ["component"],
        )
        for component in report.components:
            up.add_metric([component.name], 1.0 if component.ok else 0.0)
        yield up
        master = next(c for c in report.components if c.name == MASTER_WORKER)
        if master.last_beat_at is not None:
            age = (timezone.now() - master.last_beat_at).total_seconds()
            yield GaugeMetricFamily(
                "headway_master_worker_beat_age_seconds",
                "Seconds since the master worker's last completed lost-run reaper pass.",
                value=max(age, 0.0),
            )
        if not report.components[0].ok:  # the database
            return
        try:
            families = list(_database_families())
        except DatabaseError as exc:  # went down since its check: the health series say so
            logger.warning("cluster metrics skipped, database error: %s", exc)
            return
        yield from families


def _database_families() -> Iterator[Metric]:
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE
    pools = pool_summaries()
    per_pool = {
        "headway_pool_hosts": "Alive hosts (heartbeat within HEADWAY_HOST_TIMEOUT_SECONDS).",
        "headway_pool_slots": "Slots of the pool's alive hosts.",
        "headway_pool_slots_used": "Slots of alive hosts held by placed, starting or running runs.",
        "headway_pool_slots_free": "Slots of alive hosts not held by any run.",
        "headway_queued_runs": "Runs waiting to be placed (the pool's queue length).",
    }
    families = {name: _gauge(name, doc, ["pool"]) for name, doc in per_pool.items()}
    for pool in pools:
        values = {
            "headway_pool_hosts": pool.hosts,
            "headway_pool_slots": pool.slots,
            "headway_pool_slots_used": pool.slots_in_use,
            "headway_pool_slots_free": max(pool.slots - pool.slots_in_use, 0),
            "headway_queued_runs": pool.queued_runs,
        }
        for name, value in values.items():
            families[name].add_metric([pool.name], float(value))
    yield from families.values()

    counts = dict(
        TrialRun.objects.filter(namespace=namespace, state__in=LIVE_RUN_STATES)
        .values("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    runs = _gauge(
        "headway_runs",
        "Runs not yet exited, by state (QUEUED includes runs placed but not yet claimed).",
        ["state"],
    )
    for state in LIVE_RUN_STATES:
        runs.add_metric([state.value], float(counts.get(state, 0)))
    yield runs

    now = timezone.now()
    age = _gauge(
        "headway_host_heartbeat_age_seconds",
        "Seconds since each registered host's last heartbeat (hosts that stopped cleanly have "
        "none and are left out).",
        ["host", "pool"],
    )
    slots = _gauge("headway_host_slots", "Slots each registered host offers.", ["host", "pool"])
    hosts = WorkerHost.objects.filter(namespace=namespace, heartbeat_at__isnull=False)
    for host_name, host_pool, heartbeat_at, host_slots in hosts.values_list(
        "name", "pool", "heartbeat_at", "slots"
    ):
        if heartbeat_at is not None:
            seconds = (now - heartbeat_at).total_seconds()
            age.add_metric([host_name, host_pool], max(seconds, 0.0))
        slots.add_metric([host_name, host_pool], float(host_slots))
    yield age
    yield slots

    lost = TrialRun.objects.filter(
        namespace=namespace,
        state=RunState.EXITED,
        exit_code__isnull=True,
        started_at__isnull=False,
    ).count()
    yield CounterMetricFamily(
        "headway_runs_lost",
        "Runs a worker claimed that ended with no exit code: lost to an infrastructure failure "
        "(lease expired, host lost, pool job lost, worker shut down). Read from the database.",
        value=float(lost),
    )


class _DefaultRegistry:
    """The process's default registry as one collector (single-process mode)."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def exposition(accept: str) -> tuple[bytes, str]:
    """The scrape's body and content type, in the format ``accept`` asks for (Prometheus' text
    format, or OpenMetrics when asked)."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_DefaultRegistry())
    registry.register(ClusterCollector())
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type
