"""The agent pool type's ``PoolProvider``: hosts register by running ``python -m workers`` with
``HEADWAY_RESOURCE_POOL`` set, and Headway's scheduler (``registry.scheduling``) places the
pool's runs on them. It has no settings of its own, no poll and no nodes apart from its hosts
(an agent host's failed starts are counted on the host itself: ``registry.lifecycle``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from registry.pools.provider import (
    HostOrigin,
    NoNodes,
    PoolNode,
    PoolProvider,
    PoolSummary,
    RunExited,
)

if TYPE_CHECKING:
    from registry.pools import ResourcePool


class AgentProvider:
    """See the module; the members as ``registry.pools.provider.PoolProvider`` documents them."""

    type: ClassVar[str] = "agent"
    settings_model: ClassVar[builtins.type[BaseModel] | None] = None
    host_origin: ClassVar[HostOrigin] = HostOrigin.AGENT
    has_nodes: ClassVar[bool] = False
    hosts_note: ClassVar[str] = "host agents join it (python -m workers)"

    def poll_seconds(self) -> None:
        """None: placement runs on every heartbeat and reaper pass, not on a poll."""
        return None

    def reconcile(
        self, namespace: str, pools: Sequence[ResourcePool], run_exited: RunExited
    ) -> None:
        """Nothing: the hosts' heartbeats and leases keep runs in step (``registry.scheduling``)."""

    def submit(self, namespace: str, pools: Sequence[ResourcePool]) -> list[int]:
        """Nothing to submit: Headway's scheduler places the pool's runs itself."""
        return []

    def cancel(self, job_id: int) -> None:
        """Nothing: a host agent stops a run when its heartbeat says so (``should_preempt``)."""

    def describe(self, summaries: Sequence[PoolSummary], namespace: str, *, jobs: int) -> None:
        """Nothing beyond the hosts' counts every pool has."""

    def workers_section(self, summary: PoolSummary) -> str:
        """Nothing: the pool's hosts are its whole part of the Workers page."""
        return ""

    def host_failed_start(
        self, host_id: int, why: str, *, trial_id: int, run_id: int
    ) -> bool | None:
        """None: an agent host's count is the host's own (``registry.lifecycle._host_health``)."""
        return None

    def host_started(self, host_id: int) -> None:
        """Nothing (as ``host_failed_start``)."""

    def made_host_note(self, run_pk: int) -> str:
        """An agent pool makes no host; it says so should one be asked about."""
        return "a host an agent registered"

    def node_enable(self, namespace: str, pool: str, name: str) -> PoolNode:
        """Raises ``NoNodes`` always: an agent pool's hosts are enabled as hosts."""
        raise NoNodes(
            f"pool {pool!r} is of type agent, which has no nodes apart from its hosts "
            "(enable a host with POST /api/v1/hosts/{name}/enable/)"
        )


PROVIDER: PoolProvider = AgentProvider()
