"""The slurm pool type's ``PoolProvider``: each run is one Slurm batch job.

Its hosts are made per run (one ``WorkerHost`` per node of the run's job, ``made_for_run``),
Slurm places the jobs, and the master worker polls every ``HEADWAY_SLURM_POLL_SECONDS`` (5):
reconcile (``_reconcile``), then submit (``_submit``). Its nodes that keep failing starts are
excluded from its later jobs (``_nodes``). The heavy modules are imported inside the methods,
so finding the provider (``registry.pools.discovery``) loads no Django model.
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
    PoolNode,
    PoolProvider,
    PoolSummary,
    RunExited,
    parse_poll_seconds,
)
from registry.pools.slurm.settings import SlurmPoolSettings

if TYPE_CHECKING:
    from registry.pools import ResourcePool

POLL_ENV = "HEADWAY_SLURM_POLL_SECONDS"
_SECTION = Path(__file__).with_name("workers_section.html")


class SlurmProvider:
    """See the module; the members as ``registry.pools.provider.PoolProvider`` documents them."""

    type: ClassVar[str] = "slurm"
    settings_model: ClassVar[builtins.type[BaseModel] | None] = SlurmPoolSettings
    host_origin: ClassVar[HostOrigin] = HostOrigin.PER_RUN
    has_nodes: ClassVar[bool] = True
    hosts_note: ClassVar[str] = "its hosts are the nodes of the Slurm jobs the master submits"

    def poll_seconds(self) -> float:
        """``HEADWAY_SLURM_POLL_SECONDS`` (default 5; the poll is a no-op without a slurm pool).

        Raises:
            ImproperlyConfigured: naming the variable, for a value that is not a positive number.
        """
        return parse_poll_seconds(POLL_ENV, os.environ.get(POLL_ENV, "5"))

    def reconcile(
        self, namespace: str, pools: Sequence[ResourcePool], run_exited: RunExited
    ) -> None:
        from registry.pools.slurm._reconcile import reconcile_jobs

        reconcile_jobs(namespace, {pool.name: pool for pool in pools}, run_exited)

    def submit(self, namespace: str, pools: Sequence[ResourcePool]) -> list[int]:
        from registry.pools.slurm._submit import submit_queued_runs

        return submit_queued_runs(namespace, {pool.name: pool for pool in pools})

    def cancel(self, job_id: int) -> None:
        from registry.pools.slurm._commands import cancel

        cancel(job_id)

    def describe(self, summaries: Sequence[PoolSummary], namespace: str, *, jobs: int) -> None:
        from django.db.models import Count

        from registry.pools.slurm.models import SlurmJob, SlurmNode

        by_name = {summary.name: summary for summary in summaries}
        counts = (
            SlurmJob.objects.unfinished()
            .filter(run__namespace=namespace, state__in=["PENDING", "RUNNING"], pool__in=by_name)
            .values("pool", "state")
            .annotate(count=Count("id"))
            .values_list("pool", "state", "count")
        )
        for name, state, count in counts:
            if state == "PENDING":
                by_name[name].jobs_pending += count
            else:
                by_name[name].jobs_running += count
        excluded = SlurmNode.objects.filter(namespace=namespace, pool__in=by_name).exclude(
            excluded_reason=""
        )
        for node in excluded.order_by("pool", "name"):
            by_name[node.pool].excluded_nodes.append(_node(node))
        if jobs > 0:
            for summary in summaries:
                summary.jobs = list(
                    SlurmJob.objects.filter(
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
        from registry.pools.slurm._nodes import nodes_failed_start

        job = self._job_of(host_id)
        if job is None:
            return None
        return bool(
            nodes_failed_start(
                namespace=job["namespace"],
                pool=job["pool"],
                nodes=job["nodes"],
                why=why,
                trial_id=trial_id,
                run_id=run_id,
            )
        )

    def host_started(self, host_id: int) -> None:
        from registry.pools.slurm._nodes import nodes_started

        job = self._job_of(host_id)
        if job is not None:
            nodes_started(namespace=job["namespace"], pool=job["pool"], nodes=job["nodes"])

    def made_host_note(self, run_pk: int) -> str:
        from registry.pools.slurm.models import SlurmJob

        job_id = SlurmJob.objects.filter(run_id=run_pk).values_list("job_id", flat=True).first()
        return (
            f"a node of Slurm job {job_id}: Slurm places its runs and the master removes it "
            "when the job ends"
        )

    def node_enable(self, namespace: str, pool: str, name: str) -> PoolNode:
        from registry.pools.slurm._nodes import node_enable

        return _node(node_enable(namespace=namespace, pool=pool, name=name))

    @staticmethod
    def _job_of(host_id: int) -> dict | None:
        """The host's namespace and its run's job's pool and nodes; None: not a made host."""
        from registry.models import WorkerHost
        from registry.pools.slurm.models import SlurmJob

        host = (
            WorkerHost.objects.filter(id=host_id, made_for_run__isnull=False)
            .values("namespace", "made_for_run_id")
            .first()
        )
        if host is None:
            return None
        job = (
            SlurmJob.objects.filter(run_id=host["made_for_run_id"]).values("pool", "nodes").first()
        )
        return None if job is None else {"namespace": host["namespace"], **job}


def _node(row: object) -> PoolNode:
    from registry.pools.slurm.models import SlurmNode

    assert isinstance(row, SlurmNode)
    return PoolNode(row.name, row.pool, row.failed_starts, row.excluded_reason, row.excluded_at)


PROVIDER: PoolProvider = SlurmProvider()
