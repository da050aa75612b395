"""What each resource pool holds now: alive hosts, their slots, slots in use, queued runs.

One read for ``GET /api/v1/resource-pools/``, ``headway pool list`` and the dashboard's Workers
page, counted as placement counts (``registry.scheduling``): a host is alive when it heartbeated
within ``HEADWAY_HOST_TIMEOUT_SECONDS``; its slots in use are those of its runs that have not
exited plus the run shares holding it; a queued run waits for placement (QUEUED, no host yet,
its trial ACTIVE). Only this registry's hosts and runs count (its ``HEADWAY_QUEUE``
namespace, ``registry.models.WorkerHost.namespace``).
"""

from __future__ import annotations

import dataclasses

from django.conf import settings
from django.db.models import Count

from registry.models import RunState, SlurmJob, SlurmNode, State, TrialRun, WorkerHost
from registry.models.host import alive_cutoff
from registry.pools._file import SLURM, resource_pools


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
        jobs_pending, jobs_running (int): a slurm pool's jobs Slurm holds pending / runs now
            (0 for an agent pool). Its hosts are the running jobs' nodes.
        slurm_jobs (list[SlurmJob]): a slurm pool's latest jobs (``hosts_by_pool`` only).
        excluded_nodes (list[SlurmNode]): a slurm pool's nodes Headway's jobs avoid after runs
            failed to start there (``registry.slurm._nodes``), by name, with the reason.
    """

    name: str
    type: str
    description: str
    hosts: int = 0
    slots: int = 0
    slots_in_use: int = 0
    queued_runs: int = 0
    configured: bool = True
    jobs_pending: int = 0
    jobs_running: int = 0
    slurm_jobs: list[SlurmJob] = dataclasses.field(default_factory=list)
    excluded_nodes: list[SlurmNode] = dataclasses.field(default_factory=list)


def pool_summaries() -> list[PoolSummary]:
    """Every configured pool, in the file's order, then any pool only hosts or runs still name
    (by name); counts as in the module docstring. Four queries whatever the pool count."""
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE
    out = {
        pool.name: PoolSummary(pool.name, pool.type, pool.description)
        for pool in resource_pools().pools.values()
    }

    def summary(name: str) -> PoolSummary:
        if name not in out:
            out[name] = PoolSummary(name, "agent", "", configured=False)
        return out[name]

    # Imported here: registry.scheduling imports the scheduler, which imports this package.
    from registry.scheduling import host_list

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
    jobs = (
        SlurmJob.objects.unfinished()
        .filter(run__namespace=namespace, state__in=["PENDING", "RUNNING"])
        .values("pool", "state")
        .annotate(count=Count("id"))
        .values_list("pool", "state", "count")
    )
    for name, state, count in jobs:
        if state == "PENDING":
            summary(name).jobs_pending += count
        else:
            summary(name).jobs_running += count
    excluded = SlurmNode.objects.filter(namespace=namespace).exclude(excluded_reason="")
    for node in excluded.order_by("pool", "name"):
        summary(node.pool).excluded_nodes.append(node)
    configured = [p for p in out.values() if p.configured]
    return configured + sorted((p for p in out.values() if not p.configured), key=lambda p: p.name)


# A slurm pool's jobs listed on the Workers page, newest first.
SLURM_JOBS_SHOWN = 50


def hosts_by_pool() -> list[tuple[PoolSummary, list[WorkerHost]]]:
    """The pools of ``pool_summaries()`` (plus any pool only lost hosts still name), each with
    its hosts of this namespace by name (alive or not, as ``registry.scheduling.host_list``
    annotates them), for the Workers page; a slurm pool's summary also lists its latest
    ``SLURM_JOBS_SHOWN`` jobs (``slurm_jobs``)."""
    from registry.scheduling import host_list

    summaries = {pool.name: pool for pool in pool_summaries()}
    grouped: dict[str, list[WorkerHost]] = {name: [] for name in summaries}
    for host in host_list().filter(namespace=settings.CELERY_TASK_DEFAULT_QUEUE):
        if host.pool not in summaries:
            summaries[host.pool] = PoolSummary(host.pool, "agent", "", configured=False)
            grouped[host.pool] = []
        grouped[host.pool].append(host)
    for summary in summaries.values():
        if summary.type == SLURM:
            summary.slurm_jobs = list(
                SlurmJob.objects.filter(
                    pool=summary.name, run__namespace=settings.CELERY_TASK_DEFAULT_QUEUE
                ).select_related("run__trial")[:SLURM_JOBS_SHOWN]
            )
    return [(summaries[name], hosts) for name, hosts in grouped.items()]
