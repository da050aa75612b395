"""The placement pass: queued runs onto alive hosts of their pool, by priority then submission.

``place_queued_runs()`` runs after a run is queued or exits (on commit), on a host heartbeat
that adds capacity (``host_agent.host_beat``), and in the periodic reaper task. One pass places the queue of every resource pool of
this registry's namespace (``HEADWAY_QUEUE``) and costs O(hosts + runs holding slots + queued
runs): a fixed number of queries (the hosts, the runs holding slots, the shares holding slots,
the queue in order, the trials with a stale message), then one short transaction writing every
placement, and one statement per trial message that changes. Its steps:

1. Serialize with every other pass (``_lock.py``: a PostgreSQL advisory lock that heartbeats
   only try, never wait for), so two passes never hand out the same free slot.
2. Runs placed on a host that is no longer alive (lost, or shut down) and not claimed yet are
   dropped and their trials get a new run (``_snapshot.py``); the message on the dead host's queue then finds
   nothing to claim.
3. A host's free devices are its devices minus those held by its runs that are not EXITED and
   by its run shares that hold slots: computed every pass, never counted, so slots come back
   however a run ends. This view is built once (``_view.PoolView``) and updated in memory.
4. Queued runs without a host are taken in order of ``priority`` (smaller first), then
   submission (run ``created_at``, id); ``slots_needed``/``priority``/``max_slots`` were copied
   from the experiment's validated config when the run was queued (``schedule_run``), so no
   config is decoded here. A run goes only to hosts of its own pool (``TrialRun.pool`` ==
   ``WorkerHost.pool``). A run that fits one alive host waits for that many free slots on ONE
   host: the best fit gets it. A run larger than every alive host is ganged over the fewest
   hosts ``k`` (``k`` divides the slots) that can each give it ``slots / k``, all at once or
   none (chief part on the run, the others as ``RunShare`` rows, a task to each host's queue).
5. Backfill (EASY backfilling, Lifka 1995: a later run may start only if that does not delay
   the expected start of any earlier one): a run that cannot start now **reserves** the hosts
   it will start on (the open hosts large enough with the most free slots); runs behind it may
   only use the slots of hosts nobody reserved. Runs have no time limit, so the reservation is
   by host (the conservative form): nothing later ever takes a slot a waiting run needs. A run
   that cannot even get a reservation (every host large enough is reserved by earlier runs)
   stops its pool's queue for this pass. A run the alive hosts can never fit (or any run while
   none is alive), a run whose experiment holds its ``resources.max_slots``, and a run whose
   stored config did not validate are skipped with a message on its trial: they block nobody.

The placements are written together at the end (``_assign``), skipping runs a lifecycle
transition holds locked (``SKIP LOCKED``); other writes outside step 2 are single-row
statements. So a pass never waits for a row lock and cannot deadlock with lifecycle transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from registry.models import RunShare, RunState, Trial, TrialRun, WorkerHost
from registry.scheduling._dispatch import send_run_task, send_share_task
from registry.scheduling._hosts import GAVE_UP, waiting_message
from registry.scheduling._lock import serialized_passes
from registry.scheduling._snapshot import Queued, Snapshot
from registry.scheduling._view import Host, gang_size

NO_HOSTS = "waiting for a worker host to register"
# A run queued while its experiment's stored config did not validate says why on its trial
# (schedule_run); this one stands in when the trial's message was cleared since.
INVALID_CONFIG = (
    "not placed: the experiment's stored resources config does not validate; "
    "kill the experiment and submit it again"
)

__all__ = ["NO_HOSTS", "gang_size", "place_queued_runs", "unplaceable_message"]


def place_queued_runs(*, wait: bool = True, namespace: str | None = None) -> list[tuple[int, int]]:
    """Place the queued runs of ``namespace``'s pools that fit now (default this registry's,
    ``HEADWAY_QUEUE``); return their (trial, run) ids, in placement order.

    A change passes the namespace it concerns (``request_placement``: a run's, a heartbeat's
    host's), whichever namespace the process serving it is set to.

    Call it outside a transaction (on commit): the tasks of placed runs are sent when their
    assignment commits. Inside a transaction that never commits (a test's), runs are assigned
    but nothing is sent. ``wait=False`` (host heartbeats) never waits for a pass that is
    running: it asks that pass to run again instead and returns [] (``_lock.py``). A call made
    while this thread is already placing returns [] at once.
    """
    placed: list[tuple[int, int]] = []
    # Read once: the lock's namespace and every pass's.
    namespace = namespace or settings.CELERY_TASK_DEFAULT_QUEUE
    passes = serialized_passes(wait=wait, namespace=namespace)
    try:
        for _ in passes:
            placed.extend(_place(namespace, timezone.now()))
    finally:
        passes.close()  # a pass that raised releases the lock now, not when collected
    return placed


def unplaceable_message(
    slots: int,
    hosts: Sequence[Host | WorkerHost],
    alive: Sequence[Host | WorkerHost],
    held_back: int = 0,
) -> str | None:
    """Why a run needing ``slots`` cannot be placed however long it waits for others; else None.

    ``hosts`` are the pool's registered hosts, ``alive`` those of them heartbeating and
    enabled, ``held_back`` how many more heartbeat but are disabled or draining.
    """
    if not hosts:
        return NO_HOSTS
    if not alive and held_back:
        return (
            f"waiting for a worker host: the {held_back} alive of the {len(hosts)} registered "
            "are disabled or draining (headway host enable NAME)"
        )
    if not alive:
        timeout = settings.HEADWAY_HOST_TIMEOUT_SECONDS
        return (
            f"waiting for a worker host: none of the {len(hosts)} registered has sent a "
            f"heartbeat in the last {timeout:g} s"
        )
    if gang_size(slots, [h.slots for h in alive]) is None:
        largest = min(alive, key=lambda h: (-h.slots, h.name))
        total = sum(h.slots for h in alive)
        return (
            f"needs {slots} slots; the largest alive worker host ({largest.name}) has "
            f"{largest.slots}, and no group of alive hosts can give the same number of slots "
            f"each to add up to {slots} ({len(alive)} alive hosts, {total} slots in all)"
        )
    return None


def _place(namespace: str, now: datetime) -> list[tuple[int, int]]:
    state = Snapshot(namespace, now)
    views = state.views()
    held = state.held_by_experiments()
    registered: dict[str, list[Host]] = {}
    for host in state.hosts:
        registered.setdefault(host.pool, []).append(host)
    never: dict[tuple[str, int], str | None] = {}  # (pool, slots) -> why it can never fit
    spans: dict[tuple[str, int], int] = {}  # (pool, slots) -> hosts a run of them spans
    stopped: set[str] = set()  # pools where nothing more may start in this pass
    plans: list[_Plan] = []
    queued = state.queued()
    _clear_stale_messages()
    for run in queued:
        if run.slots is None:
            _set_message(run, run.message or INVALID_CONFIG)
            continue
        if (run.pool, run.slots) not in never:
            pool_hosts = registered.get(run.pool, [])
            alive = [h for h in pool_hosts if h.id in state.alive]
            held_back = sum(1 for h in pool_hosts if h.id in state.held_back)
            never[run.pool, run.slots] = unplaceable_message(
                run.slots, pool_hosts, alive, held_back
            )
        message = never[run.pool, run.slots]
        if message is None and run.max_slots is not None:
            holding = held.get(run.experiment_id, 0)
            if holding + run.slots > run.max_slots:
                message = (
                    f"waiting: the experiment holds {holding} of its resources.max_slots "
                    f"{run.max_slots} slots"
                )
        _set_message(run, message or "")
        if message is not None or run.pool in stopped:
            continue
        view = views[run.pool]
        if (run.pool, run.slots) not in spans:
            spans[run.pool, run.slots] = gang_size(run.slots, view.capacities) or 1
        nodes = spans[run.pool, run.slots]  # found: unplaceable_message said it can fit
        share = run.slots // nodes
        choice = view.best_fit(share, nodes)
        if choice is None:
            if view.reserve(share, nodes) is None:
                stopped.add(run.pool)  # it could not even reserve: nothing behind it starts
        else:
            hosts = [host.host for host in choice]
            plans.append(_Plan(run, hosts, view.take(choice, share), share))
            held[run.experiment_id] = held.get(run.experiment_id, 0) + run.slots
    return _assign(plans)


class _Plan(NamedTuple):
    """A run and the hosts (chief first) and devices the pass gives it."""

    run: Queued
    hosts: list[Host]
    devices: list[list[str]]
    share: int


def _assign(plans: list[_Plan]) -> list[tuple[int, int]]:
    """Write the pass's placements in one short transaction; return the (trial, run) ids placed.

    A run locked by a lifecycle transition right now (being paused, killed...) is skipped, not
    waited for (``SKIP LOCKED``), and so is one no longer queued without a host: its planned
    slots stay free until the next pass (which its transition requests). So the pass never
    waits for a row lock and never updates a run that changed since it was read, and its
    writes cost a few round trips, not one per run.
    """
    if not plans:
        return []
    now = timezone.now()
    with transaction.atomic():
        ids = set(
            TrialRun.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(id__in=[plan.run.pk for plan in plans], state=RunState.QUEUED)
            .filter(host__isnull=True)
            .values_list("id", flat=True)
        )
        kept = [plan for plan in plans if plan.run.pk in ids]
        # heartbeat_at of a QUEUED run: when its task was sent (scheduling/_redispatch.py).
        TrialRun.objects.bulk_update(
            [
                TrialRun(
                    id=plan.run.pk,
                    host_id=plan.hosts[0].id,
                    slots=plan.share,
                    devices=plan.devices[0],
                    heartbeat_at=now,
                )
                for plan in kept
            ],
            ["host", "slots", "devices", "heartbeat_at"],
            batch_size=200,
        )
        RunShare.objects.bulk_create(
            RunShare(
                run_id=plan.run.pk, node_rank=node, host_id=host.id, slots=plan.share, devices=got
            )
            for plan in kept
            for node, (host, got) in enumerate(
                zip(plan.hosts[1:], plan.devices[1:], strict=True), start=1
            )
        )
        for plan in kept:
            trial_id, run_id = plan.run.trial_id, plan.run.run_id
            transaction.on_commit(partial(send_run_task, trial_id, run_id, plan.hosts[0].queue))
            for node, host in enumerate(plan.hosts[1:], start=1):
                transaction.on_commit(partial(send_share_task, trial_id, run_id, node, host.queue))
    return [(plan.run.trial_id, plan.run.run_id) for plan in kept]


def _set_message(run: Queued, message: str) -> None:
    # A run re-queued by a lost host keeps saying so while it waits (docs/scheduling.md).
    message = waiting_message(run.message, message, run.slots or 0)
    if run.message != message:
        Trial.objects.filter(id=run.trial_id).update(scheduling_message=message)


def _clear_stale_messages() -> None:
    # A message belongs to a waiting run: once the trial has none (placed elsewhere, paused,
    # killed), it goes. One row per statement: never two trial locks at once.
    # A run on hosts its pool made for it waits on them (its pool type says why on its trial).
    waiting = TrialRun.objects.filter(trial=OuterRef("pk"), state=RunState.QUEUED).filter(
        Q(host__isnull=True) | Q(host__made_for_run__isnull=False)
    )
    stale = (
        Trial.objects.exclude(scheduling_message="")
        .exclude(Exists(waiting))
        # Why a trial ended ERROR without a run that started stays on it.
        .exclude(scheduling_message__startswith=GAVE_UP)
    )
    for trial_id in stale.values_list("id", flat=True):
        Trial.objects.filter(id=trial_id).update(scheduling_message="")
