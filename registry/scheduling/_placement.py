"""The placement pass: queued runs onto alive hosts with free slots, by priority then submission.

``place_queued_runs()`` runs after a run is queued or exits (on commit), on every host
heartbeat and in the periodic reaper task. Its steps:

1. Serialize with every other pass (a PostgreSQL advisory lock; on SQLite the pass is one
   IMMEDIATE transaction, which holds the database's write lock), so two passes never hand out
   the same free slot.
2. Runs placed on a host that is no longer alive (lost, or shut down) and not claimed yet are
   dropped and their trials get a new run; the message on the dead host's queue then finds
   nothing to claim.
3. A host's free devices are its devices minus those of its runs that are not EXITED: computed
   every pass, never counted, so slots come back however a run ends.
4. Queued runs without a host are taken in order of ``resources.priority`` (smaller first), then
   submission (run ``created_at``, id). A run whose ``slots_per_trial`` fit on one alive host
   waits for that many free slots on ONE host: the best fit (fewest free slots that suffice,
   then name) gets it, with its lowest free device ids, and the run's task goes to that host's
   queue once the assignment commits. A run larger than every alive host is ganged over the
   fewest hosts ``k`` (``k`` divides ``slots_per_trial``) that can each give it
   ``slots_per_trial / k`` slots: all of them at once or none (the chief part on the run, the
   others as ``RunShare`` rows, a task to each host's queue). Strict FIFO: the first run that
   cannot be placed now blocks every run behind it (no backfill, docs/decisions.md). A run the
   alive hosts can never fit (or any run while no host is alive) is skipped with a message on
   its trial instead, so it blocks nobody. So is a run whose experiment already holds its
   ``resources.max_slots`` (Determined's cap on an experiment's slots at once): it waits for
   one of its own experiment's runs to end and blocks no other experiment.

Writes outside step 2 are single-row statements (no transaction spans them on PostgreSQL), so a
pass never holds two row locks at once and cannot deadlock with lifecycle transitions.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone
from pydantic import ValidationError

from headway.expconf import ResourcesConfig
from registry.lifecycle._common import drop_queued_run, lock_trial
from registry.models import Experiment, RunShare, RunState, State, Trial, TrialRun, WorkerHost
from registry.models.host import shares_holding_slots
from registry.scheduler import schedule_run, send_run_task, send_share_task

logger = logging.getLogger("headway.scheduler")

NO_HOSTS = "waiting for a worker host to register"
# Id of the placement lock among PostgreSQL advisory locks (any constant no one else uses).
_ADVISORY_LOCK_ID = 0x48575953  # "HWYS"
_local = threading.local()


@dataclass
class _HostSlots:
    host: WorkerHost
    free: list[str]  # free device ids, lowest first


@dataclass(frozen=True)
class _Queued:
    pk: int
    trial_id: int
    run_id: int
    created_at: datetime
    priority: int
    slots: int
    message: str  # the trial's scheduling message now
    experiment_id: int = 0
    max_slots: int | None = None  # the experiment's resources.max_slots


def place_queued_runs() -> list[tuple[int, int]]:
    """Place the queued runs of this process's pool that fit now; return their (trial, run) ids.

    Call it outside a transaction (on commit): the tasks of placed runs are sent when their
    assignment commits. Inside a transaction that never commits (a test's), runs are assigned
    but nothing is sent. A call made while this thread is already placing returns [] at once:
    the running pass sees what the nested call would have seen.
    """
    if getattr(_local, "placing", False):
        return []
    _local.placing = True
    try:
        with _serialized():
            return _place(settings.CELERY_TASK_DEFAULT_QUEUE, timezone.now())
    finally:
        _local.placing = False


@contextmanager
def _serialized() -> Iterator[None]:
    if connection.vendor != "postgresql":
        with transaction.atomic():  # SQLite: BEGIN IMMEDIATE takes the write lock for the pass
            yield
        return
    if connection.in_atomic_block:
        # Inside a caller's transaction: held until it ends (an aborted transaction could not
        # run the unlock below).
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_LOCK_ID])
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [_ADVISORY_LOCK_ID])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_ADVISORY_LOCK_ID])


def _place(pool: str, now: datetime) -> list[tuple[int, int]]:
    hosts = list(WorkerHost.objects.filter(pool=pool).order_by("name"))
    alive = [h for h in hosts if h.is_alive(now)]
    _requeue_stranded_runs(pool, {h.id for h in alive})
    free = _free_slots(alive)
    queued = _queued_runs(pool)
    _clear_stale_messages()
    held = _slots_held_by_experiments({r.experiment_id: r.slots for r in queued if r.max_slots})
    placed: list[tuple[int, int]] = []
    blocked = False
    for run in queued:
        message = unplaceable_message(run.slots, hosts, alive)
        if message is None and run.max_slots is not None:
            holding = held.get(run.experiment_id, 0)
            if holding + run.slots > run.max_slots:
                message = (
                    f"waiting: the experiment holds {holding} of its resources.max_slots "
                    f"{run.max_slots} slots"
                )
        if message is None and not blocked:
            nodes = gang_size(run.slots, [h.slots for h in alive])
            choice = _best_fit(free, run.slots // nodes, nodes) if nodes else None
            if choice is None:
                blocked = True  # strict FIFO: later runs may not take the slots it waits for
            elif _assign(run, choice):
                placed.append((run.trial_id, run.run_id))
                held[run.experiment_id] = held.get(run.experiment_id, 0) + run.slots
        _set_message(run, message or "")
    return placed


def gang_size(slots: int, capacities: list[int]) -> int | None:
    """How many hosts a run of ``slots`` spans, given the alive hosts' slot counts; None if no
    set of them can ever hold it.

    1 when one host is large enough (the run waits for it rather than spreading out).
    Otherwise the fewest hosts ``k`` (``k`` divides ``slots``) of which at least ``k`` have
    ``slots / k`` slots each: every host runs the same number of ranks, as torchrun's
    ``--nproc-per-node`` and ``DistributedContext`` (``local_size * cross_size == size``) need.
    """
    if any(capacity >= slots for capacity in capacities):
        return 1
    for nodes in range(2, slots + 1):
        if slots % nodes == 0:
            share = slots // nodes
            if sum(1 for capacity in capacities if capacity >= share) >= nodes:
                return nodes
    return None


def unplaceable_message(slots: int, hosts: list[WorkerHost], alive: list[WorkerHost]) -> str | None:
    """Why a run needing ``slots`` cannot be placed however long it waits for others; else None.

    ``hosts`` are the pool's registered hosts, ``alive`` those of them heartbeating.
    """
    if not hosts:
        return NO_HOSTS
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


def _requeue_stranded_runs(pool: str, alive_ids: set[int]) -> None:
    placed = TrialRun.objects.filter(pool=pool, state=RunState.QUEUED, host__isnull=False)
    stranded = set(placed.exclude(host_id__in=alive_ids).values_list("trial_id", "run_id"))
    # A run ganged over several hosts is stranded when any of them is gone before it started.
    stranded.update(
        RunShare.objects.filter(run__in=placed)
        .exclude(host_id__in=alive_ids)
        .values_list("run__trial_id", "run__run_id")
    )
    for trial_id, run_id in sorted(stranded):
        # The lifecycle's lock order: the trial, then its run.
        with transaction.atomic():
            trial = lock_trial(trial_id)
            run = (
                TrialRun.objects.select_for_update()
                .filter(trial_id=trial_id, run_id=run_id, state=RunState.QUEUED)
                .first()
            )
            if run is None or run.host_id is None:
                continue
            share_hosts = set(run.shares.values_list("host_id", flat=True))
            if run.host_id in alive_ids and share_hosts <= alive_ids:
                continue
            logger.warning(
                "trial %s run %s was placed on a host that is gone before it started; re-queued",
                trial_id,
                run_id,
            )
            drop_queued_run(run)
            if trial.state == State.ACTIVE and trial.run_id == run_id:
                schedule_run(trial)


def _free_slots(alive: list[WorkerHost]) -> list[_HostSlots]:
    used_slots: dict[int, int] = {}
    used_devices: dict[int, set[str]] = {}
    held = (
        TrialRun.objects.filter(host__in=alive)
        .exclude(state=RunState.EXITED)
        .values_list("host_id", "slots", "devices")
    )
    # A share holds its host's slots while its run lives or its own processes still run.
    shares = (
        RunShare.objects.filter(host__in=alive)
        .filter(shares_holding_slots())
        .values_list("host_id", "slots", "devices")
    )
    for host_id, slots, devices in [*held, *shares]:
        used_slots[host_id] = used_slots.get(host_id, 0) + slots
        used_devices.setdefault(host_id, set()).update(str(d) for d in devices or [])
    out = []
    for host in alive:
        count = max(host.slots - used_slots.get(host.id, 0), 0)
        ids = [str(d) for d in host.devices if str(d) not in used_devices.get(host.id, set())]
        out.append(_HostSlots(host, ids[:count]))
    return out


def _slots_held_by_experiments(slots_per_trial: dict[int, int]) -> dict[int, int]:
    """Slots the runs of these experiments (id -> ``slots_per_trial``) hold now, by experiment:
    each placed run that has not exited holds its trial's ``slots_per_trial`` (chief part and
    shares together)."""
    if not slots_per_trial:
        return {}
    rows = (
        TrialRun.objects.filter(trial__experiment_id__in=slots_per_trial, host__isnull=False)
        .exclude(state=RunState.EXITED)
        .values("trial__experiment_id")
        .annotate(runs=Count("id"))
        .values_list("trial__experiment_id", "runs")
    )
    return {experiment_id: runs * slots_per_trial[experiment_id] for experiment_id, runs in rows}


def _resources(config: Any) -> ResourcesConfig:
    raw = config.get("resources") if isinstance(config, dict) else None
    try:
        return ResourcesConfig.model_validate(raw or {})
    except ValidationError:
        # Validated at submission; a config stored by an older version falls back to defaults.
        return ResourcesConfig()


def _queued_runs(pool: str) -> list[_Queued]:
    rows = list(
        TrialRun.objects.filter(
            pool=pool,
            state=RunState.QUEUED,
            host__isnull=True,
            trial__state=State.ACTIVE,
        ).values_list(
            "id",
            "trial_id",
            "run_id",
            "created_at",
            "trial__experiment_id",
            "trial__scheduling_message",
        )
    )
    configs = Experiment.objects.filter(id__in={row[4] for row in rows}).values_list("id", "config")
    resources = {experiment_id: _resources(config) for experiment_id, config in configs}
    queued = [
        _Queued(
            pk=pk,
            trial_id=trial_id,
            run_id=run_id,
            created_at=created_at,
            priority=resources[experiment_id].priority,
            slots=resources[experiment_id].slots_per_trial,
            message=message,
            experiment_id=experiment_id,
            max_slots=resources[experiment_id].max_slots,
        )
        for pk, trial_id, run_id, created_at, experiment_id, message in rows
    ]
    queued.sort(key=lambda run: (run.priority, run.created_at, run.pk))
    return queued


def _best_fit(free: list[_HostSlots], share: int, nodes: int = 1) -> list[_HostSlots] | None:
    """The ``nodes`` hosts with ``share`` free slots each that fit best (fewest free slots, then
    name), the first being the chief; None when fewer hosts have that much free."""
    fitting = sorted(
        (host for host in free if len(host.free) >= share),
        key=lambda h: (len(h.free), h.host.name),
    )
    return fitting[:nodes] if len(fitting) >= nodes else None


def _assign(run: _Queued, choice: list[_HostSlots]) -> bool:
    share = run.slots // len(choice)
    chief, others = choice[0], choice[1:]
    with transaction.atomic():
        # Conditional: a run paused, killed or placed since it was read is left alone.
        # heartbeat_at of a QUEUED run: when its task was sent (scheduling/_redispatch.py).
        updated = TrialRun.objects.filter(
            id=run.pk, state=RunState.QUEUED, host__isnull=True
        ).update(
            host=chief.host, slots=share, devices=chief.free[:share], heartbeat_at=timezone.now()
        )
        if not updated:
            return False
        RunShare.objects.bulk_create(
            RunShare(
                run_id=run.pk,
                node_rank=node,
                host=host.host,
                slots=share,
                devices=host.free[:share],
            )
            for node, host in enumerate(others, start=1)
        )
    for host in choice:
        del host.free[:share]
    transaction.on_commit(partial(send_run_task, run.trial_id, run.run_id, chief.host.queue))
    for node, host in enumerate(others, start=1):
        transaction.on_commit(
            partial(send_share_task, run.trial_id, run.run_id, node, host.host.queue)
        )
    return True


def _set_message(run: _Queued, message: str) -> None:
    if run.message != message:
        Trial.objects.filter(id=run.trial_id).update(scheduling_message=message)


def _clear_stale_messages() -> None:
    # A message belongs to a waiting run: once the trial has none (placed elsewhere, paused,
    # killed), it goes. One row per statement: never two trial locks at once.
    waiting = TrialRun.objects.filter(
        trial=OuterRef("pk"), state=RunState.QUEUED, host__isnull=True
    )
    stale = Trial.objects.exclude(scheduling_message="").exclude(Exists(waiting))
    for trial_id in stale.values_list("id", flat=True):
        Trial.objects.filter(id=trial_id).update(scheduling_message="")
