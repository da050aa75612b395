"""``PoolProvider``: what a pool type (``type:`` in the admin's pools file) gives the master.

Each pool type is one folder, ``registry/pools/<type>/``, whose ``provider`` module exports
``PROVIDER``, an object of this protocol; ``registry.pools.discovery`` finds the folders
(general code never names a type). The master asks the provider of a pool's type:

- how hosts appear (``host_origin``): registered by host agents, which Headway's scheduler
  places runs on (``HostOrigin.AGENT``), or made by the pool for one run each and removed when
  that run's work ended (``HostOrigin.PER_RUN``: ``WorkerHost.made_for_run``; the pool's own
  manager places the runs, the scheduler leaves the pool's runs and hosts alone);
- the pool entry's own settings (``settings_model``): the parser checks a pool's extra keys
  against it, so a typo stops the master at start-up;
- a periodic poll (``poll_seconds``): the master worker's beat sends ``headway.pool_poll`` for
  the type at that interval, which reconciles (``reconcile``) and then submits (``submit``);
- what to show with the pool (``describe``, ``workers_section``) and, for a type with nodes
  of its own (``has_nodes``), putting back a node it excluded (``node_enable``);
- how its made hosts count failed and successful starts (``host_failed_start``,
  ``host_started``; ``registry.lifecycle._host_health`` counts agent hosts itself).

The design follows Determined's resource managers (agents and HPC batch-scheduler
dispatchers behind one interface) and Kubernetes' cloud providers: one seam, one folder per
kind.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel

if TYPE_CHECKING:
    from registry.pools._file import ResourcePool

# registry.lifecycle.trial_run_exited, passed in: the pool types sit below the lifecycle.
RunExited = Callable[..., object]


class HostOrigin(enum.StrEnum):
    """How a pool's hosts appear."""

    AGENT = "agent"
    """Host agents register them (``python -m workers``); Headway's scheduler places runs."""
    PER_RUN = "per_run"
    """The pool makes them for one run each (``WorkerHost.made_for_run``) and places its runs."""


@dataclasses.dataclass(frozen=True)
class PoolNode:
    """A node of a pool that has nodes of its own, as Headway's runs found it.

    Attributes:
        name (str): the node's name in the pool's cluster.
        pool (str): the pool's name.
        failed_starts (int): runs lost on it in a row before their ranks started.
        excluded_reason (str): why Headway's runs avoid it; "" when they do not.
        excluded_at (datetime | None): when it was excluded.
    """

    name: str
    pool: str
    failed_starts: int
    excluded_reason: str
    excluded_at: datetime | None


@dataclasses.dataclass
class PoolSummary:
    """One pool and what it holds now (counted by ``registry.scheduling.pool_summaries``; the
    type's own details by its provider's ``describe``).

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
        cluster_nodes, cluster_slots (int | None): a per-run pool's cluster as its type last
            saw it: alive nodes and the slots they hold (None: not known, or an agent pool).
        cluster_error (str): why the pool's cluster did not answer its last poll ("" when it did).
        pending_reasons (list[str]): why each pending job waits, in its cluster's own words.
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
    cluster_nodes: int | None = None
    cluster_slots: int | None = None
    cluster_error: str = ""
    pending_reasons: list[str] = dataclasses.field(default_factory=list)
    excluded_nodes: list[PoolNode] = dataclasses.field(default_factory=list)
    jobs: list[Any] = dataclasses.field(default_factory=list)
    section: str = ""


class NoNodes(ValueError):
    """The pool's type has no nodes of its own (``node_enable`` of a type without them)."""


class PoolProvider(Protocol):
    """One pool type's side of the master (see the module for when each member is used).

    Attributes:
        type (str): the ``type:`` of the admin's pools file; its folder's name.
        settings_model (type[BaseModel] | None): the pydantic model of the type's own pool
            settings (frozen, ``extra="forbid"``); None: a pool of the type takes none.
        host_origin (HostOrigin): how the pool's hosts appear.
        has_nodes (bool): whether ``node_enable`` applies (nodes the type may exclude).
        hosts_note (str): how the pool's hosts appear, for people (in an error that refuses a
            host agent joining a ``PER_RUN`` pool).
    """

    type: ClassVar[str]
    settings_model: ClassVar[builtins.type[BaseModel] | None]
    host_origin: ClassVar[HostOrigin]
    has_nodes: ClassVar[bool]
    hosts_note: ClassVar[str]

    def poll_seconds(self) -> float | None:
        """Seconds between two polls of the type's pools; None: the type is not polled.

        Raises:
            ImproperlyConfigured: the type's interval setting is not a positive number.
        """
        ...

    def reconcile(
        self, namespace: str, pools: Sequence[ResourcePool], run_exited: RunExited
    ) -> None:
        """Bring runs of ``pools`` (all of this type, configured) in ``namespace`` in step with
        the pool's own state (jobs ended, pending, cancelled...), reporting ended runs through
        ``run_exited`` (``registry.lifecycle.trial_run_exited``'s signature) and cancelling
        (``cancel``) the work of runs closed or killed meanwhile."""
        ...

    def submit(self, namespace: str, pools: Sequence[ResourcePool]) -> list[int]:
        """Hand the queued runs of ``pools`` in ``namespace`` to the pool (a per-run pool makes
        their hosts here); return the pool's ids of what it submitted."""
        ...

    def cancel(self, job_id: int) -> None:
        """End the pool's work of id ``job_id`` now (what ``submit`` returned), whatever it was
        doing; a no-op for work already ended."""
        ...

    def describe(self, summaries: Sequence[PoolSummary], namespace: str, *, jobs: int) -> None:
        """Fill the type's details of ``summaries`` (pools of this type, in ``namespace``):
        ``jobs_pending``, ``jobs_running``, ``excluded_nodes`` and, when ``jobs`` > 0, the
        latest ``jobs`` of each pool (``PoolSummary.jobs``, for the Workers page)."""
        ...

    def workers_section(self, summary: PoolSummary) -> str:
        """The type's part of the Workers page for one pool (safe HTML; "" for none)."""
        ...

    def host_failed_start(
        self, host_id: int, why: str, *, trial_id: int, run_id: int
    ) -> bool | None:
        """Count a run lost before its ranks started on host ``host_id``, one of this type's
        made hosts (``PER_RUN``); True when that excluded a node. None: not one of its hosts."""
        ...

    def host_started(self, host_id: int) -> None:
        """A run's ranks started on host ``host_id`` (a no-op unless one of its made hosts)."""
        ...

    def made_host_note(self, run_pk: int) -> str:
        """What made the host of run ``run_pk`` (for people: ``a node of batch job 12 ...``)."""
        ...

    def node_enable(self, namespace: str, pool: str, name: str) -> PoolNode:
        """An admin puts node ``name`` of ``pool`` back (no longer excluded, its count at 0).

        Raises:
            NoNodes: the type has no nodes (``has_nodes`` False).
            InvalidInput: (400, ``node``) not a node name of the type's cluster.
            RegistryError: (404) the pool has no such node that Headway counted or excluded.
        """
        ...


def parse_poll_seconds(name: str, raw: str) -> float:
    """A polling type's interval from the value ``raw`` of its variable ``name``, in seconds,
    for its provider's ``poll_seconds``.

    Raises:
        ImproperlyConfigured: naming the variable, for a value that is not a positive number.
    """
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a positive number of seconds")
    return seconds
