"""A host agent's own heartbeat and stop, as the master serves them: renew the leases the host
lists, upsert its row, fence a host that still runs what was given away, and ask for a placement
pass only when the beat can make one possible (``registry.lifecycle.host_agent`` routes here)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from headway.client import wire
from registry import scheduling
from registry.errors import IllegalTransition, InvalidInput
from registry.lifecycle._log_batches import append_logs  # noqa: F401 (the agent routes' API)
from registry.models import (
    RunShare,
    RunState,
    TrialRun,
    WorkerHost,
)
from registry.models.host import alive_cutoff
from registry.pools import DEFAULT_TYPE, check_resource_pool, pool_provider

# -- the host itself ----------------------------------------------------------------------------


class NamespaceFixed(IllegalTransition):
    """409 naming ``namespace``: a registered host's beat names another cluster namespace.

    A host token stands for one host of one cluster; moving its host into another namespace
    would hand that cluster's runs (and their run tokens) to a host its admin never admitted.
    """

    def __init__(self, host: str, registered: str, wanted: str) -> None:
        message = (
            f"host {host} is registered in namespace {registered!r}, not {wanted!r}; a host "
            "token cannot move its host (an admin forgets the host with DELETE hosts/{name}/ "
            "and issues a new token)"
        )
        super().__init__(message, {"namespace": [message]})


def host_queue(host: str, namespace: str | None = None) -> str:
    """Host ``host``'s Celery queue, ``<namespace>.host.<name>`` (default namespace: this
    master's ``HEADWAY_QUEUE``; as ``workers.hosts.host_queue``)."""
    return wire.host_queue_name(namespace or settings.CELERY_TASK_DEFAULT_QUEUE, host)


class Beat(NamedTuple):
    """What ``host_beat`` did: the host row, runs sent again, leases renewed, and the listed
    runs (``(trial_id, run_id)``) and shares (``(trial_id, run_id, node_rank)``) the master
    already ended."""

    row: WorkerHost
    resent: int
    renewed: int
    stale_runs: list[tuple[int, int]]
    stale_shares: list[tuple[int, int, int]]


@transaction.atomic
def host_beat(
    host: str,
    *,
    pool: str,
    devices: Sequence[str],
    gpu: bool,
    started_at: datetime,
    namespace: str | None = None,
    redispatch: bool = False,
    runs: Sequence[dict] = (),
    shares: Sequence[dict] = (),
    agent_id: str = "",
    agent_pid: int | None = None,
    agent_address: str = "",
) -> Beat:
    """Register or heartbeat ``host`` (``scheduling.host_heartbeat``'s upsert); with
    ``redispatch`` (a worker's first beat) send again the runs placed on it and not claimed
    (``scheduling.host_redispatch``); then, only when the beat can make a placement possible
    that was not before (``_may_place``), request a placement pass.

    First the leases the host holds are renewed (``runs``: ``{"trial_id", "run_id"}``,
    ``shares``: with ``"node_rank"``; one UPDATE per table, as ``workers.leases.renew``): only
    those placed on ``host`` and not EXITED. ``namespace``: the cluster namespace the host
    serves (default: this master's ``HEADWAY_QUEUE``). The placement pass is that namespace's
    and never waits for a running one (``place_queued_runs(wait=False)``). A pass reads every
    waiting run, so the beat of an alive host whose slots, devices, gpu, pool and namespace are
    unchanged requests none: what frees or adds capacity otherwise requests its own (a run's
    exit, a queued run, a host enabled) and the reaper's periodic pass places what waited on
    time alone (a retry back-off).

    ``agent_id`` (with ``agent_pid``, ``agent_address``) names the agent process: a second
    agent of a host whose holder still heartbeats is refused before anything is renewed.

    One transaction. The first beat of a namespace served after no host of it was (the
    master's own outage) first renews every live lease of the namespace
    (``scheduling.resume_after_outage``). A beat listing a run or share the master already
    ended (``stale_leases``: the host was cut off and its run given away) leaves the host row's
    heartbeat time as it was, so the host is not placeable until it stopped them (fencing).

    Returns a ``Beat``: the host row, how many runs were sent again, how many leases were
    renewed, and the stale runs and shares (``stale_leases``) the answer names.

    Raises:
        InvalidInput: (400, ``pool``) a pool the admin's pools file does not list.
        AgentConflict: (409) another agent instance holds the host (``host_heartbeat``).
        NamespaceFixed: (409, ``namespace``) the host is registered in another namespace
            (the default counts as this master's); nothing is renewed or changed.
    """
    joined = check_resource_pool(pool, field="pool")
    if joined.hosts_per_run and not _made_for_a_run(host):
        note = pool_provider(joined.type).hosts_note
        raise InvalidInput(
            {
                "pool": [
                    f"pool {pool!r} is a {joined.type} pool: {note}; a host agent joins a pool "
                    f"of type {DEFAULT_TYPE}"
                ]
            }
        )
    # The row as it was, in one query: which agent holds it, its heartbeat time (kept while
    # fenced), what decides whether this beat changes what can be placed, and the namespace
    # it was registered in.
    current = WorkerHost.objects.filter(name=host).first()
    scheduling.host_agent_check(current, agent_id)
    previous = None if current is None else tuple(getattr(current, f) for f in _PLACEABLE)
    before = previous[0] if previous is not None else None
    wanted = namespace or settings.CELERY_TASK_DEFAULT_QUEUE
    if previous is not None and previous[_PLACEABLE.index("namespace")] != wanted:
        raise NamespaceFixed(host, previous[_PLACEABLE.index("namespace")], wanted)
    # The first beat served after the master's own outage renews every lease of the namespace.
    resumed = scheduling.resume_after_outage(wanted, served_at=before)
    renewed = _renew_leases(host, runs, shares)
    stale_runs, stale_shares = stale_leases(host, runs, shares)
    fenced = bool(stale_runs or stale_shares)
    row = scheduling.host_heartbeat(
        name=host,
        pool=pool,
        namespace=namespace,
        queue=host_queue(host, namespace),
        slots=len(devices),
        devices=devices,
        gpu=gpu,
        started_at=started_at,
        agent_id=agent_id,
        agent_pid=agent_pid,
        agent_address=agent_address,
        current=current,
    )
    if fenced:
        # It still runs what the master gave away: no pass may place on its slots until it
        # stopped them (same transaction: no pass ever sees the refreshed row).
        WorkerHost.objects.filter(name=host).update(heartbeat_at=before)
        row.heartbeat_at = before
    resent = scheduling.host_redispatch(name=host) if redispatch else 0
    # A fenced beat refreshed nothing: no pass may see its slots yet. The first beat (and one
    # that renewed leases after the master's own outage) asks for one whatever it changed.
    if not fenced and (redispatch or resumed or _may_place(previous, row)):
        scheduling.request_placement(row.namespace, wait=False)
    return Beat(row, resent, renewed, stale_runs, stale_shares)


# What a pass reads of a host row (``registry.scheduling._snapshot``): whether it is alive, and
# its capacity and eligibility. The leases a beat lists are not capacity: the runs' rows are.
_PLACEABLE = ("heartbeat_at", "slots", "devices", "gpu", "pool", "namespace")


def _may_place(previous: tuple | None, row: WorkerHost) -> bool:
    """Whether refreshing host row ``previous`` (``_PLACEABLE``'s fields; None: a new row) into
    ``row`` can make a placement possible that was not: the host was not alive before this beat
    (new, stopped, silent past ``HEADWAY_HOST_TIMEOUT_SECONDS``, or fenced until now), or its
    capacity or eligibility changed."""
    if previous is None or previous[0] is None or previous[0] < alive_cutoff():
        return True
    return tuple(previous[1:]) != tuple(getattr(row, field) for field in _PLACEABLE[1:])


def stale_leases(
    host: str, runs: Sequence[dict], shares: Sequence[dict]
) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The runs and shares a heartbeat of ``host`` listed that are placed on it and already
    EXITED: the master gave them away (lost) while the host could not reach it, so the host
    must stop them (fencing, ``HostInfo.stale_runs``). Only the host's own rows are looked at."""
    stale_runs: list[tuple[int, int]] = []
    if runs:
        found = Q(pk__in=[])
        for ref in runs:
            found |= Q(trial_id=ref["trial_id"], run_id=ref["run_id"])
        stale_runs = sorted(
            TrialRun.objects.filter(found, host__name=host, state=RunState.EXITED).values_list(
                "trial_id", "run_id"
            )
        )
    stale_shares: list[tuple[int, int, int]] = []
    if shares:
        found = Q(pk__in=[])
        for ref in shares:
            found |= Q(
                run__trial_id=ref["trial_id"], run__run_id=ref["run_id"], node_rank=ref["node_rank"]
            )
        stale_shares = sorted(
            RunShare.objects.filter(found, host__name=host, state=RunState.EXITED).values_list(
                "run__trial_id", "run__run_id", "node_rank"
            )
        )
    return stale_runs, stale_shares


def _made_for_a_run(host: str) -> bool:
    """Whether its pool made ``host`` for one run (``WorkerHost.made_for_run``)."""
    return WorkerHost.objects.filter(name=host, made_for_run__isnull=False).exists()


def _renew_leases(host: str, runs: Sequence[dict], shares: Sequence[dict]) -> int:
    """Renew the listed runs and shares that are placed on ``host`` (never another host's)."""
    run_ids = Q()
    for ref in runs:
        run_ids |= Q(trial_id=ref["trial_id"], run_id=ref["run_id"])
    share_ids = Q()
    for ref in shares:
        share_ids |= Q(
            run__trial_id=ref["trial_id"], run__run_id=ref["run_id"], node_rank=ref["node_rank"]
        )
    return scheduling.renew_leases(
        runs=run_ids & Q(host__name=host) if runs else None,
        shares=share_ids & Q(host__name=host) if shares else None,
    )


def host_timing() -> dict[str, float]:
    """The master's heartbeat interval, lease and kill grace (seconds), sent with every
    heartbeat answer: the host stops a run whose lease it could not renew by these, so the
    two sides never disagree on when a lease ends (``HostInfo``)."""
    return {
        "heartbeat_seconds": settings.HEADWAY_HOST_HEARTBEAT_SECONDS,
        "lease_seconds": settings.HEADWAY_LEASE_SECONDS,
        "kill_grace_seconds": settings.HEADWAY_KILL_GRACE_SECONDS,
        "outage_tolerance_seconds": settings.HEADWAY_OUTAGE_TOLERANCE_SECONDS,
    }


def host_stop(host: str) -> None:
    """The host's worker shuts down: no run is placed on it any more (``host_stopped``), and a
    placement pass is requested: the runs placed on it and not claimed yet move elsewhere."""
    scheduling.host_stopped(name=host)
    namespace = WorkerHost.objects.filter(name=host).values_list("namespace", flat=True).first()
    if namespace is not None:
        scheduling.request_placement(namespace, wait=False)


# -- runs placed on the host (the chief's part) -------------------------------------------------
