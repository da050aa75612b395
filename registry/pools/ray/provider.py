"""The ray pool type's ``PoolProvider``: each run is one Ray job on the admin's Ray cluster.

Its hosts are made per run (one ``WorkerHost`` per bundle of the run's placement group,
``made_for_run``), Ray places the jobs, and the master worker polls every
``HEADWAY_RAY_POLL_SECONDS`` (5): reconcile (``_reconcile``), then submit (``_submit``). Ray
reschedules and excludes its own nodes, so the type has no nodes of its own to exclude. The
heavy modules are imported inside the methods, so finding the provider loads no Django model.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from registry.pools.provider import (
    HostOrigin,
    NoNodes,
    PoolNode,
    PoolProvider,
    PoolSummary,
    RunExited,
    parse_poll_seconds,
)
from registry.pools.ray.settings import RayPoolSettings

if TYPE_CHECKING:
    from registry.pools import ResourcePool

POLL_ENV = "HEADWAY_RAY_POLL_SECONDS"
_SECTION = Path(__file__).with_name("workers_section.html")


class RayProvider:
    """See the module; the members as ``registry.pools.provider.PoolProvider`` documents them."""

    type: ClassVar[str] = "ray"
    settings_model: ClassVar[builtins.type[BaseModel] | None] = RayPoolSettings
    host_origin: ClassVar[HostOrigin] = HostOrigin.PER_RUN
    has_nodes: ClassVar[bool] = False
    hosts_note: ClassVar[str] = "its hosts are the bundles of the Ray jobs the master submits"

    def poll_seconds(self) -> float:
        """``HEADWAY_RAY_POLL_SECONDS`` (default 5; the poll is a no-op without a ray pool).

        Raises:
            ImproperlyConfigured: naming the variable, for a value that is not a positive number.
        """
        return parse_poll_seconds(POLL_ENV, os.environ.get(POLL_ENV, "5"))

    def reconcile(
        self, namespace: str, pools: Sequence[ResourcePool], run_exited: RunExited
    ) -> None:
        from registry.pools.ray._reconcile import reconcile_jobs

        reconcile_jobs(namespace, {pool.name: pool for pool in pools}, run_exited)

    def submit(self, namespace: str, pools: Sequence[ResourcePool]) -> list[int]:
        from registry.pools.ray._submit import submit_queued_runs
        from registry.pools.ray.models import RayJob

        ids = submit_queued_runs(namespace, {pool.name: pool for pool in pools})
        # The protocol's ids are integers: the rows' keys (cancel takes them back).
        return list(
            RayJob.objects.filter(submission_id__in=ids).order_by("id").values_list("id", flat=True)
        )

    def cancel(self, job_id: int) -> None:
        from registry.pools import resource_pools
        from registry.pools.ray._client import stop
        from registry.pools.ray.models import RayJob
        from registry.pools.ray.settings import ray_settings

        job = RayJob.objects.filter(id=job_id).values("pool", "submission_id").first()
        pool = resource_pools().pools.get(job["pool"]) if job is not None else None
        if job is not None and pool is not None:
            stop(ray_settings(pool).address, job["submission_id"])

    def describe(self, summaries: Sequence[PoolSummary], namespace: str, *, jobs: int) -> None:
        from registry.pools.ray.models import RayJob, RayPoolState

        by_name = {summary.name: summary for summary in summaries}
        unfinished = RayJob.objects.unfinished().filter(run__namespace=namespace, pool__in=by_name)
        for job in unfinished.values("pool", "state", "reason", "submission_id"):
            summary = by_name[job["pool"]]
            if job["state"] in ("PENDING", "PLACING"):
                summary.jobs_pending += 1
                reason = job["reason"] or job["state"]
                summary.pending_reasons.append(f"{job['submission_id']}: {reason}")
            elif job["state"] == "RUNNING":
                summary.jobs_running += 1
        for state in RayPoolState.objects.filter(namespace=namespace, pool__in=by_name):
            summary = by_name[state.pool]
            summary.cluster_nodes, summary.cluster_slots = state.nodes, state.slots
            summary.cluster_error = state.error
        if jobs > 0:
            for summary in summaries:
                summary.jobs = list(
                    RayJob.objects.filter(
                        pool=summary.name, run__namespace=namespace
                    ).select_related("run__trial")[:jobs]
                )

    def workers_section(self, summary: PoolSummary) -> str:
        from django.template import Context, Engine

        template = Engine.get_default().from_string(_SECTION.read_text())
        return template.render(Context({"pool": summary}))

    def host_failed_start(
        self, host_id: int, why: str, *, trial_id: int, run_id: int
    ) -> bool | None:
        # Ray places the bundles and reschedules away from failed nodes itself: nothing to
        # count here, but the host is one of this type's when its run has a Ray job.
        from registry.models import WorkerHost

        made = WorkerHost.objects.filter(id=host_id, made_for_run__ray_job__isnull=False)
        return False if made.exists() else None

    def host_started(self, host_id: int) -> None:
        return None

    def made_host_note(self, run_pk: int) -> str:
        from registry.pools.ray.models import RayJob

        found = RayJob.objects.filter(run_id=run_pk).values_list("submission_id", flat=True)
        return (
            f"a bundle of Ray job {found.first()}: Ray places its runs and the master removes "
            "it when the job ends"
        )

    def node_enable(self, namespace: str, pool: str, name: str) -> PoolNode:
        raise NoNodes(f"pool {pool} is of type ray: Ray excludes and reschedules its own nodes")


PROVIDER: PoolProvider = RayProvider()
