"""What one placement pass reads: hosts, the runs and shares holding slots, the queue.

A ``Snapshot`` reads them in a fixed number of queries whatever the cluster's size (hosts as
tuples, device lists as stored text decoded only for hosts with a free slot), re-queues the
runs stranded on hosts that are gone before they started, and builds each pool's free-slot view
(``_view.PoolView``). ``_placement`` then walks the queue over it.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import NamedTuple

from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from registry.models import (
    HostAdminState,
    RunShare,
    RunState,
    State,
    TrialRun,
    WorkerHost,
    lock_trial,
)
from registry.models.host import alive_cutoff, shares_holding_slots
from registry.pools import resource_pools
from registry.scheduling._queue import close_queued_run, queue_run
from registry.scheduling._view import Host, HostSlots, PoolView

logger = logging.getLogger("headway.scheduler")


class Queued(NamedTuple):
    """A queued run as the pass reads it (a tuple: 11,000 of them are built every pass)."""

    pk: int
    trial_id: int
    run_id: int
    pool: str
    slots: int | None  # the experiment's slots_per_trial; None: its config did not validate
    max_slots: int | None  # the experiment's resources.max_slots
    experiment_id: int
    message: str  # the trial's scheduling message now


class Snapshot:
    """What one pass over one namespace read (``now``: the pass's clock for liveness)."""

    def __init__(self, namespace: str, now: datetime) -> None:
        self.namespace = namespace
        self.now = now
        # A host a pool made for one run (its hosts are per run: registry.pools.provider) is
        # never placed on, never stranded (a pending job's nodes have not beaten yet).
        rows = (
            WorkerHost.objects.filter(namespace=namespace, made_for_run__isnull=True)
            .order_by("name")
            .values_list(
                "id",
                "name",
                "pool",
                "queue",
                "slots",
                _as_text("devices"),
                "heartbeat_at",
                "admin_state",
            )
        )
        self.hosts = []
        held_back: set[int] = set()  # disabled or draining: no new run goes there
        for *fields, admin_state in rows:
            self.hosts.append(Host(*fields))
            if admin_state != HostAdminState.ENABLED:
                held_back.add(fields[0])
        cutoff = alive_cutoff(now)  # WorkerHost.is_alive's rule, for tuples
        alive = [h for h in self.hosts if h.heartbeat_at is not None and h.heartbeat_at >= cutoff]
        # "alive" here means placeable: a disabled or draining host is treated as gone for new
        # runs, and runs placed on it but not claimed yet are re-queued like a lost host's.
        self.alive = {h.id: h for h in alive if h.id not in held_back}
        self.held_back = {h.id for h in alive if h.id in held_back}
        self._read_holders()
        if self._requeue_stranded_runs():
            self._read_holders()  # dropped runs hold nothing now

    def _read_holders(self) -> None:
        # Runs and shares holding slots: every placed run that has not EXITED, and the shares
        # that hold their host's slots (registry.models.host.shares_holding_slots).
        self.runs = list(
            TrialRun.objects.filter(
                namespace=self.namespace, host__isnull=False, host__made_for_run__isnull=True
            )
            .exclude(state=RunState.EXITED)
            .values_list(
                "trial_id",
                "run_id",
                "state",
                "host_id",
                "slots",
                _as_text("devices"),  # decoded only for hosts with a free slot
                "trial__experiment_id",
                "slots_needed",
            )
        )
        self.shares = list(
            RunShare.objects.filter(
                shares_holding_slots(self.now),
                run__namespace=self.namespace,
                host__made_for_run__isnull=True,
            ).values_list(
                "host_id",
                "slots",
                _as_text("devices"),
                "run__state",
                "run__trial_id",
                "run__run_id",
            )
        )

    def _requeue_stranded_runs(self) -> bool:
        stranded = {
            (trial_id, run_id)
            for trial_id, run_id, state, host_id, *_ in self.runs
            if state == RunState.QUEUED and host_id not in self.alive
        }
        # A run ganged over several hosts is stranded when any of them is gone before it started.
        stranded.update(
            (trial_id, run_id)
            for host_id, _, _, state, trial_id, run_id in self.shares
            if state == RunState.QUEUED and host_id not in self.alive
        )
        for trial_id, run_id in sorted(stranded):
            _requeue(trial_id, run_id, set(self.alive))
        return bool(stranded)

    def views(self) -> dict[str, PoolView]:
        """Each pool's free slots on its alive hosts."""
        used_slots: dict[int, int] = {}
        used_devices: dict[int, list[str]] = {}  # stored device lists, as text
        holders = [(r[3], r[4], r[5]) for r in self.runs] + [s[:3] for s in self.shares]
        for host_id, slots, devices in holders:
            used_slots[host_id] = used_slots.get(host_id, 0) + slots
            used_devices.setdefault(host_id, []).append(devices)
        by_pool: dict[str, list[HostSlots]] = {}
        for host in self.alive.values():
            count = max(host.slots - used_slots.get(host.id, 0), 0)
            ids: list[str] = []
            if count:  # a full host's device lists are never decoded
                held = {str(d) for text in used_devices.get(host.id, []) for d in _ids(text)}
                ids = [str(d) for d in _ids(host.devices_json) if str(d) not in held]
            by_pool.setdefault(host.pool, []).append(HostSlots(host, ids[:count]))
        return {pool: PoolView(hosts) for pool, hosts in by_pool.items()}

    def held_by_experiments(self) -> dict[int, int]:
        """Slots each experiment's placed runs hold now (chief part and shares together)."""
        held: dict[int, int] = {}
        for *_, slots, _, experiment_id, needed in self.runs:
            held[experiment_id] = held.get(experiment_id, 0) + (needed or slots)
        return held

    def queued(self) -> list[Queued]:
        """The queue, in placement order (one indexed query: ``run_queue_order``)."""
        rows = (
            TrialRun.objects.filter(
                namespace=self.namespace,
                state=RunState.QUEUED,
                host__isnull=True,
                trial__state=State.ACTIVE,
            )
            # A run in its back-off after a loss before start waits (registry.lifecycle._lost).
            .filter(Q(not_before__isnull=True) | Q(not_before__lte=self.now))
            # A pool whose hosts are per run places its runs itself (its provider's submit).
            .exclude(pool__in=resource_pools().hosts_per_run())
            .order_by("priority", "created_at", "id")
            .values_list(
                "id",
                "trial_id",
                "run_id",
                "pool",
                "slots_needed",
                "max_slots",
                "trial__experiment_id",
                "trial__scheduling_message",
            )
        )
        return [Queued(*row) for row in rows]


def _as_text(field: str) -> Cast:
    """A JSON column read as its stored text (no decoding by the ORM)."""
    return Cast(field, output_field=TextField())


def _ids(text: str | None) -> list[object]:
    """A stored device list (JSON text) decoded; [] for NULL or not a list."""
    found = json.loads(text) if text else []
    return found if isinstance(found, list) else []


def _requeue(trial_id: int, run_id: int, alive_ids: set[int]) -> None:
    # The lifecycle's lock order: the trial, then its run.
    with transaction.atomic():
        trial = lock_trial(trial_id)
        run = (
            TrialRun.objects.select_for_update(no_key=True)
            .filter(trial_id=trial_id, run_id=run_id, state=RunState.QUEUED)
            .first()
        )
        if run is None or run.host_id is None:
            return
        share_hosts = set(run.shares.values_list("host_id", flat=True))
        if run.host_id in alive_ids and share_hosts <= alive_ids:
            return
        logger.warning(
            "trial %s run %s was placed on a host that is gone (or disabled or draining) before "
            "it started; re-queued",
            trial_id,
            run_id,
        )
        # No pass is requested: this one places the new run (it reads the queue after this).
        close_queued_run(run)
        if trial.state == State.ACTIVE and trial.run_id == run_id:
            queue_run(trial)
