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

import dataclasses
from typing import Any

from django.conf import settings
from django.db.models import Count

from registry.models import RunState, State, TrialRun, WorkerHost
from registry.models.host import alive_cutoff
from registry.pools import DEFAULT_TYPE, PoolNode, pool_provider, resource_pools
from registry.scheduling._overview import host_list


@dataclasses.dataclass
class PoolSummary:
    """One pool and what it holds now.

    Attributes:
        name, type, description (str): the pool's entry in the admin's file.
        hosts (int): alive hosts that joined the pool.
        slots (int): slots of those alive hosts.
        slots_in_use (int): of those slots, held by runs and shares (placed, starting, running).
        queued_runs (int): runs of the pool waiting to be placed.
        configured (bool): False for a pool that hosts or runs name but the file no longer lists
            (hosts of it get no runs; its runs wait until the file lists it again).
        hosts_per_run (bool): the pool makes its hosts per run (``HostOrigin.PER_RUN``).
        jobs_pending, jobs_running (int): a per-run pool's jobs its cluster holds pending / runs
            now (0 for an agent pool). Its hosts are the running jobs' nodes.
        excluded_nodes (list[PoolNode]): the pool's nodes Headway's runs avoid after runs failed
            to start there, by name, with the reason ([] for a type without nodes).
        jobs (list): a per-run pool's latest jobs, as its type stores them (``hosts_by_pool``
            only, for the Workers page).
        section (str): the type's part of the Workers page (``hosts_by_pool`` only; safe HTML).
    """

    name: str
    type: str
    description: str
    hosts: int = 0
    slots: int = 0
    slots_in_use: int = 0
    queued_runs: int = 0
    configured: bool = True
    hosts_per_run: bool = False
    jobs_pending: int = 0
    jobs_running: int = 0
    excluded_nodes: list[PoolNode] = dataclasses.field(default_factory=list)
    jobs: list[Any] = dataclasses.field(default_factory=list)
    section: str = ""


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
