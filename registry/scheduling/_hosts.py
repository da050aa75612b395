"""Worker hosts as the registry keeps them: registration and heartbeat, shutdown, re-dispatch.

Workers call these (``workers.hosts``); every write is a single-row statement, so a heartbeat
never waits behind a placement pass or a lifecycle transition.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from registry.errors import IllegalTransition
from registry.models import RunShare, RunState, TrialRun, WorkerHost
from registry.models.host import alive_cutoff
from registry.scheduling._dispatch import send_run_task, send_share_task


def lease_expiry() -> timedelta:
    """How long after its last renewal the registry treats a run's (or share's) lease as lost
    while it serves other hosts of the run's namespace: ``HEADWAY_LEASE_SECONDS`` plus
    ``HEADWAY_LEASE_MARGIN_SECONDS`` (``registry.scheduling._leases``: while it serves none, the
    outage tolerance plus the margin). A host cut off that long may still run the run's
    processes until the outage tolerance; it is fenced (``registry.lifecycle.host_agent``)."""
    return timedelta(seconds=settings.HEADWAY_LEASE_SECONDS + settings.HEADWAY_LEASE_MARGIN_SECONDS)


_REQUEUED = ": re-queued, not counted as a restart"


def lost_message(reason: str, slots: int) -> str:
    """A trial's scheduling message after an infrastructure loss re-queued its run, e.g.
    ``host gpu-b lost: re-queued, not counted as a restart; waiting for 4 slots``."""
    return f"{reason}{_REQUEUED}; waiting for {slots} slot{'s' if slots != 1 else ''}"


def backoff_message(reason: str, losses: int, limit: int, at: datetime, delay: float) -> str:
    """A trial's scheduling message after its run was lost before its ranks started and was
    re-queued with a back-off, e.g. ``host gpu-b could not start run 2: ... (lost before its
    ranks started, 1 of 3 in a row): re-queued, not counted as a restart; next attempt at
    12:00:10 UTC (in 10 s)``. Once the back-off ends the tail becomes the usual waiting note
    (``waiting_message``)."""
    when = at.astimezone(UTC).strftime("%H:%M:%S UTC")
    head = f"{reason} (lost before its ranks started, {losses} of {limit} in a row)"
    tail = f"{_REQUEUED}; next attempt at {when} (in {delay:g} s)"
    return head[: 500 - len(tail)] + tail


GAVE_UP = "failed: lost before its ranks started"


def gave_up_message(reason: str, losses: int, limit: int) -> str:
    """The scheduling message of a trial ended ERROR by ``losses`` runs in a row lost before
    their ranks started, ``reason`` the last one's cause; it stays on the ended trial."""
    message = f"{GAVE_UP} {losses} times in a row (max_lost_before_start {limit}); last: {reason}"
    return message[:500]


def waiting_message(previous: str, message: str, slots: int) -> str:
    """The scheduling message of a run still waiting: ``message`` (why it waits; empty: its
    turn), after the note of the loss that re-queued it when ``previous`` had one (so the
    trial says what happened until the run is placed)."""
    head, found, _ = previous.partition(_REQUEUED)
    if not found:
        return message
    return f"{head}{_REQUEUED}; {message or lost_message('', slots).split('; ', 1)[1]}"


def host_heartbeat(
    *,
    name: str,
    pool: str,
    queue: str,
    slots: int,
    devices: Sequence[str],
    gpu: bool,
    started_at: datetime,
    namespace: str | None = None,
    agent_id: str = "",
    agent_pid: int | None = None,
    agent_address: str = "",
    current: WorkerHost | None = None,
) -> WorkerHost:
    """Register host ``name`` or refresh it: an upsert that also recreates a deleted row.

    Arguments:
        name (str): the host's unique name (``HEADWAY_HOST_NAME``).
        pool (str): the resource pool the host joins (``HEADWAY_RESOURCE_POOL``); only runs of
            that pool are placed here.
        namespace (str | None): the cluster namespace the host serves (its agent's
            ``HEADWAY_QUEUE``; default this process's): only a registry of the same namespace
            places here.
        queue (str): the host's own Celery queue, where placed runs are sent.
        slots (int): how many slots the host offers (>= 0).
        devices (list[str]): one id per slot, lowest first (``"0"`` for GPU 0, ``"cpu0"``...).
        gpu (bool): whether the devices are GPUs (trial processes then get
            ``CUDA_VISIBLE_DEVICES``).
        started_at (datetime): when the worker started (kept across re-creations).
        agent_id (str): the agent process's instance id (a uuid it draws at start; ``""``: an
            agent that sends none, never checked). ``agent_pid``, ``agent_address``: that
            process's pid and address, to name it when another agent is refused.

    Raises:
        AgentConflict: (409) another agent instance holds the host and heartbeated within
            ``HEADWAY_HOST_TIMEOUT_SECONDS`` (two agents of one host would both take its runs).

    ``current``: the host's row as the caller read it in this transaction (a heartbeat reads
    it first): when the UPDATE refreshes it, it is returned with the written fields set
    instead of being read again (its other fields, e.g. ``admin_state``, as they were read).
    """
    fields = {
        "pool": pool,
        "namespace": namespace or settings.CELERY_TASK_DEFAULT_QUEUE,
        "queue": queue,
        "slots": slots,
        "devices": list(devices),
        "gpu": gpu,
        "started_at": started_at,
        "heartbeat_at": timezone.now(),
    }
    if agent_id:
        fields |= {"agent_id": agent_id, "agent_pid": agent_pid, "agent_address": agent_address}
    # One conditional UPDATE: the same agent, an agent without an id, or a holder that stopped
    # or went silent for the host timeout (the same rule as ``alive``) may take the row.
    free = Q()
    if agent_id:
        free = (
            Q(agent_id__in=("", agent_id))
            | Q(heartbeat_at__isnull=True)
            | Q(heartbeat_at__lt=alive_cutoff())
        )
    if WorkerHost.objects.filter(free, name=name).update(**fields):
        if current is None:
            return WorkerHost.objects.get(name=name)
        for field, value in fields.items():
            setattr(current, field, value)
        return current
    holder = WorkerHost.objects.filter(name=name).first()
    if holder is not None:
        raise AgentConflict(holder)
    try:
        with transaction.atomic():
            return WorkerHost.objects.create(name=name, **fields)
    except IntegrityError:
        # Another process created the row between our UPDATE and INSERT: refresh that row.
        if not WorkerHost.objects.filter(free, name=name).update(**fields):
            raise AgentConflict(WorkerHost.objects.get(name=name)) from None
        return WorkerHost.objects.get(name=name)


class AgentConflict(IllegalTransition):
    """409: another agent process holds this host and heartbeats (named in the message)."""

    def __init__(self, holder: WorkerHost) -> None:
        timeout = settings.HEADWAY_HOST_TIMEOUT_SECONDS
        beat = holder.heartbeat_at.isoformat() if holder.heartbeat_at else "never"
        super().__init__(
            f"host {holder.name} is already served by another agent (instance "
            f"{holder.agent_id}, pid {holder.agent_pid}, address {holder.agent_address or '?'}, "
            f"started {holder.started_at.isoformat()}, last heartbeat {beat}): stop that "
            f"agent first, or wait until it has been silent for {timeout:g} s "
            "(HEADWAY_HOST_TIMEOUT_SECONDS)"
        )


def host_agent_check(row: WorkerHost | None, agent_id: str) -> None:
    """Refuse agent ``agent_id`` of host row ``row`` (as read at the start of its heartbeat;
    None: a new host) before the beat renews anything, when another agent instance holds the
    host and heartbeated within the host timeout (the rule of ``host_heartbeat``'s UPDATE).

    Raises:
        AgentConflict: (409) naming the other agent.
    """
    if (
        row is not None
        and agent_id
        and row.agent_id not in ("", agent_id)
        and row.heartbeat_at is not None
        and row.heartbeat_at >= alive_cutoff()
    ):
        raise AgentConflict(row)


def host_stopped(*, name: str) -> None:
    """The host's worker is shutting down: it holds no slots for placement from now on.

    Runs placed on it but not claimed yet are given a new run elsewhere by the next placement
    pass (``place_queued_runs``); its running runs end as usual (preempted or reaped).
    """
    WorkerHost.objects.filter(name=name).update(heartbeat_at=None)


def host_redispatch(*, name: str) -> int:
    """Send again the task of every run placed on ``name`` and not claimed yet; return how many.

    Called when the host's worker (re)starts: a message sent to the queue before a crash may
    have been taken and lost. A duplicate delivery is harmless (the claim lets one in).
    """
    runs = list(
        TrialRun.objects.filter(host__name=name, state=RunState.QUEUED).values_list(
            "trial_id", "run_id", "host__queue"
        )
    )
    for trial_id, run_id, queue in runs:
        transaction.on_commit(partial(send_run_task, trial_id, run_id, queue))
    # This host's parts of runs ganged over several hosts, not claimed yet.
    shares = list(
        RunShare.objects.filter(host__name=name, state=RunState.QUEUED)
        .exclude(run__state=RunState.EXITED)
        .values_list("run__trial_id", "run__run_id", "node_rank", "host__queue")
    )
    for trial_id, run_id, node_rank, queue in shares:
        transaction.on_commit(partial(send_share_task, trial_id, run_id, node_rank, queue))
    return len(runs) + len(shares)


def renew_leases(runs: Q | None = None, shares: Q | None = None) -> int:
    """Renew the leases of the runs and shares these filters select: one UPDATE per table of
    ``heartbeat_at`` (the lease), never of an EXITED row; return how many rows.

    The one renewal both host paths use: the worker's heartbeat (``workers.leases.renew``) and
    the host agent's REST heartbeat (``registry.lifecycle.host_agent``).
    """
    now = timezone.now()
    count = 0
    if runs is not None:
        live_runs = TrialRun.objects.filter(runs).exclude(state=RunState.EXITED)
        count += live_runs.update(heartbeat_at=now)
    if shares is not None:
        live_shares = RunShare.objects.filter(shares).exclude(state=RunState.EXITED)
        count += live_shares.update(heartbeat_at=now)
    return count
