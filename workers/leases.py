"""The host side of leases: which runs this worker holds, their renewal, and the self-stop.

A run placed on this host (and each share of a run over several hosts) holds a lease on the
host's slots from its claim on. The registry sees a lease as the row's ``heartbeat_at``; the
host's heartbeat (``workers.hosts``, one REST call) lists every lease this process holds and
the master renews them with the host row, and each run's own loop renews its own
(``workers.runner``). Here, on the host, a lease is kept until the outage budget
(``HEADWAY_OUTAGE_TOLERANCE_SECONDS``, the master's, at least ``HEADWAY_LEASE_SECONDS``:
``workers.config``) after the *start* of its last renewal that succeeded: the master wrote
``heartbeat_at`` at or after that moment, so the host never keeps a run longer than the master
waits for it while the master serves no host (``registry.scheduling._leases``).

Three things end a lease on the host, each making the watchdog thread stop that run's process
group itself (SIGTERM now, SIGKILL ``HEADWAY_KILL_GRACE_SECONDS`` later, without calling the
master, which may hang):

- the master stayed unreachable for the outage budget (``check``): a short outage of the master
  (a restart, a failover) costs the trial nothing, and this host cannot tell its own partition
  from the master's outage, so it does not try;
- the master refused the host's token (``expire_all``);
- the master answered a heartbeat naming the run as stale (``expire_stale``): it gave the run
  away while this host could not reach it (it serves other hosts, so it judged this one lost
  after the lease plus ``HEADWAY_LEASE_MARGIN_SECONDS``). The master keeps the host unplaceable
  while a heartbeat lists a stale run, and the stale run's token is refused: the copy that went
  on computing here writes nothing and shares its slots with no new run (fencing).

The run's exit is then reported as lost (re-queued, not counted as a restart, or ignored when
the master ended it already). The why is logged in the worker's log at once and in the trial's
log once the master answers again. Kubernetes' node leases and Determined's agent heartbeats
follow the same rule for a node the control plane has given up on.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from workers.config import settings
from workers.supervision import ProcessGroupKiller

logger = logging.getLogger("headway.worker")

T = TypeVar("T")

RUN = "run"
SHARE = "share"


@dataclasses.dataclass(eq=False)
class Lease:
    """One run's (``kind`` RUN, ``node_rank`` 0) or share's (SHARE, its node rank) lease.

    Attributes:
        renewed (float): ``time.monotonic()`` at the start of the last renewal that succeeded
            (the claim counts as one).
        expired (str): why the lease expired (empty while valid); set once, never cleared.
        killer: the process group to stop, once the process started.
        note: appends a line to the trial's log (buffered until the master answers).
    """

    kind: str
    trial_id: int
    run_id: int
    node_rank: int
    renewed: float
    expired: str = ""
    killer: ProcessGroupKiller | None = None
    note: Callable[[str], None] | None = None
    file: Path | None = None

    def renewed_at(self, started: float) -> None:
        """A renewal that started at ``started`` (monotonic) succeeded."""
        with _lock:
            moved = not self.expired and started > self.renewed
            if moved:
                self.renewed = started
        if moved:
            self._write()

    def publish(self, path: Path) -> None:
        """Keep the lease's end (a ``time.monotonic()`` value) in ``path`` from now on, for the
        trial's guard (``headway.exec.guard --lease-file``): the backstop if this worker freezes."""
        self.file = path
        self._write()

    def _write(self) -> None:
        if self.file is None:
            return
        end = self.renewed + settings.outage_budget()
        partial = self.file.with_name(self.file.name + ".new")
        try:
            partial.write_text(f"{end:.3f}\n")
            os.replace(partial, self.file)  # the guard never reads half a number
        except OSError:
            logger.exception("could not write the lease file %s", self.file)

    def remaining(self, now: float | None = None) -> float:
        """Seconds left before this host must stop the run unless renewed (negative: overdue):
        the outage budget (``settings.outage_budget()``) after the last renewal."""
        now = time.monotonic() if now is None else now
        return self.renewed + settings.outage_budget() - now


_held: dict[tuple[str, int, int, int], Lease] = {}
_lock = threading.Lock()


def _key(lease: Lease) -> tuple[str, int, int, int]:
    return (lease.kind, lease.trial_id, lease.run_id, lease.node_rank)


def hold(kind: str, trial_id: int, run_id: int, node_rank: int, claimed: float) -> Lease:
    """Start holding the lease of a run (``node_rank`` 0) or share claimed by a call that
    started at ``claimed`` (monotonic)."""
    lease = Lease(kind, trial_id, run_id, node_rank, renewed=claimed)
    with _lock:
        _held[_key(lease)] = lease
    return lease


def release(lease: Lease) -> None:
    """The run's process ended and its exit is being reported: nothing to renew or stop."""
    with _lock:
        if _held.get(_key(lease)) is lease:
            del _held[_key(lease)]


def held() -> list[Lease]:
    """The leases this process holds now."""
    with _lock:
        return list(_held.values())


Renewal = Callable[[list[tuple[int, int]], list[tuple[int, int, int]]], T]


def renew(send: Renewal[T]) -> T:
    """Renew every valid lease this process holds: ``send(runs, shares)`` (the host's
    heartbeat: ``(trial_id, run_id)`` and ``(trial_id, run_id, node_rank)``) must have the
    master renew them all; its answer is returned. Its error is raised when the master is
    unreachable (the leases then age). An expired lease is listed too until its process ended
    (``release``): the master keeps counting its slots, and keeps this host unplaceable while
    the run is one it gave away (fencing)."""
    started = time.monotonic()
    leases = held()
    runs = [(lease.trial_id, lease.run_id) for lease in leases if lease.kind == RUN]
    shares = [
        (lease.trial_id, lease.run_id, lease.node_rank) for lease in leases if lease.kind == SHARE
    ]
    answer = send(runs, shares)
    for lease in leases:
        lease.renewed_at(started)
    return answer


def check(now: float | None = None) -> list[Lease]:
    """Expire the leases whose time is up (stopping their processes) and escalate the kills of
    expired ones; return the leases that expired in this call. Never calls the master."""
    now = time.monotonic() if now is None else now
    newly: list[Lease] = []
    for lease in held():
        with _lock:
            due = not lease.expired and lease.remaining(now) <= 0
            if due:
                overdue = now - lease.renewed
                lease.expired = (
                    f"this host could not renew the lease of trial {lease.trial_id} run "
                    f"{lease.run_id} for {overdue:.0f} s (HEADWAY_OUTAGE_TOLERANCE_SECONDS="
                    f"{settings.outage_budget():g}): the master is unreachable"
                )
        if due:
            newly.append(lease)
            logger.error("%s: stopping its processes (SIGTERM now, SIGKILL after %g s)",
                         lease.expired, settings.HEADWAY_KILL_GRACE_SECONDS)  # fmt: skip
            if lease.note is not None:
                lease.note(f"[headway] {lease.expired}: stopping the trial's processes")
        if lease.expired and lease.killer is not None:
            lease.killer.schedule()
            message = lease.killer.escalate()
            if message and lease.note is not None:
                lease.note(message)
    return newly


def expire_all(why: str) -> int:
    """End every lease this process holds at once (``why``: the master refused this host's
    token), logged in the worker's and each trial's log; the next ``check()`` (a fraction of
    a second later) stops their processes. Returns how many ended."""
    ended = []
    with _lock:
        for lease in _held.values():
            if not lease.expired:
                lease.expired = why
                ended.append(lease)
    for lease in ended:
        logger.error(
            "trial %s run %s: %s: stopping its processes", lease.trial_id, lease.run_id, why
        )
        if lease.note is not None:
            lease.note(f"[headway] {why}: stopping the trial's processes")
    return len(ended)


def expire_stale(runs: Sequence[Sequence[int]], shares: Sequence[Sequence[int]]) -> int:
    """End the leases of the runs (``(trial_id, run_id)``) and shares (``(trial_id, run_id,
    node_rank)``) the master says it ended while this host could not reach it (a heartbeat's
    ``stale_runs``, ``stale_shares``): the next ``check()`` stops their processes. A lease whose
    process already ended is left alone (its exit, reported after the heartbeat listed it, is
    what the master recorded). Returns how many ended."""
    stale = {(RUN, t, r, 0) for t, r in runs} | {(SHARE, t, r, n) for t, r, n in shares}
    ended = []
    with _lock:
        for key, lease in _held.items():
            # A run whose process already ended is EXITED on the master by this host's own
            # exit report, sent after the heartbeat listed the run: nothing to stop, no loss.
            if key in stale and not lease.expired and not _process_ended(lease):
                lease.expired = (
                    f"the master ended trial {lease.trial_id} run {lease.run_id} (lost) while "
                    "this host could not reach it and re-queued its trial"
                )
                ended.append(lease)
    for lease in ended:
        logger.error("%s: stopping its processes", lease.expired)
        if lease.note is not None:
            lease.note(f"[headway] {lease.expired}: stopping this copy's processes")
    return len(ended)


def _process_ended(lease: Lease) -> bool:
    return lease.killer is not None and lease.killer.process.poll() is not None


def attach(lease: Lease, killer: ProcessGroupKiller, note: Callable[[str], None]) -> None:
    """The run's process started: the watchdog may stop it from now on (at once when the lease
    expired meanwhile)."""
    lease.killer = killer
    lease.note = note


class Watchdog:
    """A daemon thread calling ``check()`` several times per lease (it sleeps in between)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.tick = max(0.05, min(0.5, settings.HEADWAY_LEASE_SECONDS / 10))

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="headway-lease", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                check()
            except Exception:  # the watchdog must outlive any one bad lease
                logger.exception("lease watchdog")

    def stop(self) -> None:
        """End the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
