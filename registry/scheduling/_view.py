"""One placement pass's view of a pool's free slots: best fit, gangs and backfill reservations.

Built once per pass from the alive hosts and the devices their runs hold
(``registry.scheduling._placement``), then updated in memory as the pass places and reserves,
so each queued run costs a few dictionary operations, not a scan of the hosts: the hosts are
kept in buckets by their number of free slots (a host has at most its ``slots`` free, a small
number), each bucket in name order.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple


class Host(NamedTuple):
    """A ``WorkerHost`` row as a pass reads it (a tuple: 1,000 model instances cost more than
    the queries that read them)."""

    id: int
    name: str
    pool: str
    queue: str
    slots: int
    devices_json: str  # the ``devices`` list as stored, decoded only for hosts with free slots
    heartbeat_at: datetime | None


@dataclass
class HostSlots:
    """An alive host and its free device ids (lowest first) in this pass."""

    host: Host
    free: list[str]

    @property
    def key(self) -> tuple[str, int]:
        """Sort key within a bucket: by name (ids break ties between equal names)."""
        return (self.host.name, self.host.id)


@dataclass
class PoolView:
    """The free slots of one pool's alive hosts, as one pass sees them.

    A host is either **open** (later runs may take its free slots) or **reserved** for a run
    that waits for it (EASY backfilling's reservation, Lifka 1995; docs/scheduling.md): once reserved, no
    run after it in the queue gets its slots in this pass.
    """

    hosts: list[HostSlots]
    # free-slot count -> open hosts with that many free slots, in name order
    _buckets: dict[int, list[tuple[tuple[str, int], HostSlots]]] = field(default_factory=dict)
    _capacities: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for host in self.hosts:
            self._add(host)
        self._capacities = [h.host.slots for h in self.hosts]

    @property
    def capacities(self) -> list[int]:
        """The slots of every alive host of the pool (reserved or not)."""
        return self._capacities

    def _add(self, host: HostSlots) -> None:
        insort(self._buckets.setdefault(len(host.free), []), (host.key, host))

    def _remove(self, host: HostSlots) -> None:
        bucket = self._buckets[len(host.free)]
        bucket.remove((host.key, host))
        if not bucket:
            del self._buckets[len(host.free)]

    def best_fit(self, share: int, nodes: int = 1) -> list[HostSlots] | None:
        """The ``nodes`` open hosts with at least ``share`` free slots that fit best (fewest
        free slots, then name), the first being the chief; None when fewer are open.

        Best fit keeps large holes free for wide runs (as HPC batch schedulers' and
        Determined's fitting do).
        """
        chosen: list[HostSlots] = []
        for free in sorted(count for count in self._buckets if count >= share):
            for _, host in self._buckets[free]:
                chosen.append(host)
                if len(chosen) == nodes:
                    return chosen
        return None

    def take(self, hosts: list[HostSlots], share: int) -> list[list[str]]:
        """Hand ``share`` lowest free devices of each of ``hosts`` to a run; return them."""
        taken = []
        for host in hosts:
            self._remove(host)
            taken.append(host.free[:share])
            del host.free[:share]
            self._add(host)
        return taken

    def reserve(self, share: int, nodes: int) -> list[HostSlots] | None:
        """Reserve for a run that cannot start now the ``nodes`` open hosts with at least
        ``share`` slots that are closest to it (most free slots, then name); None, reserving
        nothing, when fewer open hosts are large enough.

        The run will start on them as soon as their runs free enough slots: the runs after it
        in the queue may not take their slots, so they can never delay its start (EASY
        backfilling, Lifka 1995, with reservations by host because runs have no time limits).
        """
        chosen: list[HostSlots] = []
        for free in sorted(self._buckets, reverse=True):
            for _, host in self._buckets[free]:
                if host.host.slots >= share:
                    chosen.append(host)
                    if len(chosen) == nodes:
                        for picked in chosen:
                            self._remove(picked)
                        return chosen
        return None

    def most_free(self) -> int:
        """The most free slots on one open host (0 when none is open)."""
        return max(self._buckets, default=0)


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
