"""What each resource pool holds now: alive hosts, their slots, slots in use, queued runs.

One read for ``GET /api/v1/resource-pools/``, ``headway pool list`` and the dashboard's Workers
page, counted as placement counts: a host is alive when it heartbeated within
``HEADWAY_HOST_TIMEOUT_SECONDS``; its slots in use are those of its runs that have not exited
plus the run shares holding it; a queued run waits for placement (QUEUED, no host yet, its trial
ACTIVE). Only this registry's hosts and runs count (its ``HEADWAY_QUEUE`` namespace,
``registry.models.WorkerHost.namespace``). What only a pool type knows (its jobs, its excluded
nodes) its provider adds (``PoolProvider.describe``).
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count

from registry.models import RunState, State, TrialRun, WorkerHost
from registry.models.host import alive_cutoff
from registry.pools import DEFAULT_TYPE, PoolSummary, pool_provider, resource_pools
from registry.scheduling._overview import host_list

# A pool's jobs listed on the Workers page, newest first.
JOBS_SHOWN = 50


def _describe(summaries: list[PoolSummary], namespace: str, *, jobs: int) -> None:
    """Each type's provider fills its pools' details (one call per type)."""
    by_type: dict[str, list[PoolSummary]] = {}
    for summary in summaries:
        if summary.configured:
            by_type.setdefault(summary.type, []).append(summary)
    for type_name, pools in by_type.items():
        pool_provider(type_name).describe(pools, namespace, jobs=jobs)


def _summaries(namespace: str) -> dict[str, PoolSummary]:
    out = {
        pool.name: PoolSummary(
            pool.name, pool.type, pool.description, hosts_per_run=pool.hosts_per_run
        )
        for pool in resource_pools().pools.values()
    }

    def summary(name: str) -> PoolSummary:
        if name not in out:
            out[name] = PoolSummary(name, DEFAULT_TYPE, "", configured=False)
        return out[name]

    alive = host_list().filter(namespace=namespace, heartbeat_at__gte=alive_cutoff())
    # slots_in_use is host_list()'s annotation, which the stubs cannot see through its return type.
    columns = alive.values_list("pool", "slots", "slots_in_use")  # type: ignore[misc]
    for name, slots, in_use in columns:
        pool = summary(name)
        pool.hosts += 1
        pool.slots += slots
        pool.slots_in_use += in_use
    queued = (
        TrialRun.objects.filter(
            namespace=namespace, state=RunState.QUEUED, host__isnull=True, trial__state=State.ACTIVE
        )
        .values("pool")
        .annotate(count=Count("id"))
        .values_list("pool", "count")
    )
    for name, count in queued:
        summary(name).queued_runs += count
    return out


def _ordered(out: dict[str, PoolSummary]) -> list[PoolSummary]:
    configured = [p for p in out.values() if p.configured]
    return configured + sorted((p for p in out.values() if not p.configured), key=lambda p: p.name)


def pool_summaries() -> list[PoolSummary]:
    """Every configured pool, in the file's order, then any pool only hosts or runs still name
    (by name); counts as in the module docstring. Two queries, then each pool type's own."""
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE
    summaries = _ordered(_summaries(namespace))
    _describe(summaries, namespace, jobs=0)
    return summaries


def hosts_by_pool() -> list[tuple[PoolSummary, list[WorkerHost]]]:
    """The pools of ``pool_summaries()`` (plus any pool only lost hosts still name), each with
    its hosts of this namespace by name (alive or not, as ``host_list`` annotates them), for
    the Workers page; each summary also carries its type's latest ``JOBS_SHOWN`` jobs (``jobs``)
    and its type's part of the page (``section``)."""
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE
    summaries = {pool.name: pool for pool in _ordered(_summaries(namespace))}
    grouped: dict[str, list[WorkerHost]] = {name: [] for name in summaries}
    for host in host_list().filter(namespace=namespace):
        if host.pool not in summaries:
            summaries[host.pool] = PoolSummary(host.pool, DEFAULT_TYPE, "", configured=False)
            grouped[host.pool] = []
        grouped[host.pool].append(host)
    _describe(list(summaries.values()), namespace, jobs=JOBS_SHOWN)
    for summary in summaries.values():
        if summary.configured:
            summary.section = pool_provider(summary.type).workers_section(summary)
    return [(summaries[name], hosts) for name, hosts in grouped.items()]
