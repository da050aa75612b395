"""A running trial process's loop on its host: output to the trial's log, heartbeats, kills.

``workers.runner`` starts the process (its own process group, under ``headway.exec.guard``),
then calls ``supervise`` (the chief's part of a run) or ``supervise_share`` (another host's part)
until the process's output ends. The loop sends output lines to the trial's log in batches
(``LogWriter``, one REST call a batch), renews the run's lease with each heartbeat
(``workers.leases``), learns of a kill request from the heartbeat's answer, checks for a failed
host of the run, and escalates a scheduled kill (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from headway.client import wire
from headway.exec.loglines import clean_line, read_lines
from workers import distributed, leases, link, outage, supervision
from workers.config import settings

EOF = object()  # put on the lines queue after the process's last line
# How long output is still read after the trial's process ended, when something it started
# keeps the output open (see ``_pump_output``).
OUTPUT_AFTER_EXIT_S = 30.0
LOG_BATCH = 500  # lines a call: bounds one request's size (lines are cut too)


def pump(stream: TextIO, lines: queue.Queue[object]) -> None:
    """Thread body: put each line of ``stream`` (NUL-free, cut to the line limit) on ``lines``
    as ``(text, its line number from 1)``, then ``EOF``. The number is the line's position for
    the master, which stores a resent line once (``LogWriter``)."""
    lines_read = read_lines(stream, settings.HEADWAY_MAX_LOG_LINE_CHARS)  # NUL-free, cut
    for number, line in enumerate(lines_read, start=1):
        lines.put((line, number))
    lines.put(EOF)


class LogWriter:
    """Batches a run's output lines (or its share ``node_rank``'s) into calls to the master
    (few calls, bounded delay); each line keeps the time it was written.

    Thread-safe: the lease watchdog adds lines too (workers/leases.py). A failed flush keeps its
    lines for the next one, so none is lost while the master is away; a line of the process's
    output carries its position in it (the pipe's line number, or the output file's byte
    offset just past it: ``workers.reattach``), so the master stores it once however often its
    batch is sent (a flush whose answer was lost, a restarted agent re-reading the file). The
    agent's own ``[headway]`` notes carry none.

    ``on_delivered(offset)``: called after each batch the master stored, with the largest
    position among its lines (for an output file: its offset), so a restarted agent resumes
    after them."""

    def __init__(
        self,
        trial_id: int,
        run_id: int,
        node_rank: int = 0,
        on_delivered: Callable[[int], None] | None = None,
    ) -> None:
        self.trial_id = trial_id
        self.run_id = run_id
        self.node_rank = node_rank
        self.pending: list[tuple[str, datetime]] = []
        self._positions: list[int | None] = []  # one per pending line
        self.on_delivered = on_delivered
        self._lock = threading.Lock()

    def add(self, message: str, position: int | None = None) -> None:
        """Queue one line (cleaned and cut as the master stores it); ``position``: its position
        in the process's output (line number, or where the line ends in the run's output
        file), increasing from line to line; None for the agent's own notes."""
        line = (clean_line(message, settings.HEADWAY_MAX_LOG_LINE_CHARS), datetime.now(UTC))
        with self._lock:
            self.pending.append(line)
            self._positions.append(position)

    def flush(self) -> None:
        """Send the queued lines, ``LOG_BATCH`` a call; raise the master's error (the lines
        not sent stay queued, in order)."""
        while True:
            with self._lock:
                batch = [
                    (message, when, position)
                    for (message, when), position in zip(
                        self.pending[:LOG_BATCH], self._positions, strict=False
                    )
                ]
            if not batch:
                return
            api = link.api()
            if self.node_rank:
                api.share_logs(self.trial_id, self.run_id, self.node_rank, batch)
            else:
                api.run_logs(self.trial_id, self.run_id, batch)
            with self._lock:
                del self.pending[: len(batch)]
                positions = [p for p in self._positions[: len(batch)] if p is not None]
                del self._positions[: len(batch)]
            if positions and self.on_delivered is not None:
                self.on_delivered(max(positions))


class _Calls:
    """One run loop's calls to the master: an outage is ridden out (``master``); a refused
    token (401) is not an outage: as with the host heartbeat's, every lease of this host ends
    and ``killer`` stops the run's processes now, supervised by the loop to their end (not left
    to the guard's backstop at the lease's end); the master is not called again."""

    def __init__(self, master: outage.MasterOutage, killer: supervision.ProcessGroupKiller):
        self.master = master
        self.killer = killer
        self.refused = False

    def attempt(self, call: Callable[[], object]) -> bool:
        """``call()`` through ``master.attempt``; False when it failed or was not tried."""
        if self.refused:
            return False
        try:
            return self.master.attempt(call)
        except Exception as exc:
            if not link.is_refused(exc):
                raise
            self.refused = True
            leases.expire_all(link.refusal(exc))
            self.killer.schedule()
            return False


def _pump_output(
    killer: supervision.ProcessGroupKiller,
    lines: queue.Queue[object],
    logs: LogWriter,
    *,
    on_flush: Callable[[], None],
    on_beat: Callable[[], object],
    lease: leases.Lease | None = None,
) -> None:
    """Copy output to the logs until the process ends: flush them every
    ``HEADWAY_LOG_FLUSH_SECONDS`` (then ``on_flush()``: is a kill due?), ``on_beat()`` every
    ``HEADWAY_HEARTBEAT_SECONDS`` or ``HEADWAY_STOP_POLL_SECONDS`` if shorter, and escalate a
    scheduled kill.

    An outage of the master shorter than the outage tolerance (``settings.outage_budget()``)
    is ridden out (lines wait in memory, calls are retried: workers/outage.py); a longer one
    stops the process, since the master may then give its trial to another host. A refused
    token (401: revoked) stops the process at once and ends every lease of this host."""
    flush_every = settings.HEADWAY_LOG_FLUSH_SECONDS
    # The heartbeat's answer carries the run's stop request: a kill waits at most this long.
    beat_every = min(settings.HEADWAY_HEARTBEAT_SECONDS, settings.HEADWAY_STOP_POLL_SECONDS)
    last_flush = last_beat = time.monotonic()

    def beat() -> None:
        # A heartbeat renews the run's lease (workers/leases.py) from the moment it started.
        started = time.monotonic()
        on_beat()
        if lease is not None:
            lease.renewed_at(started)

    master = outage.MasterOutage(settings.outage_budget())
    attempt = _Calls(master, killer).attempt
    ended_at: float | None = None  # when the trial's process was first seen ended
    while True:
        try:
            item = lines.get(timeout=flush_every)
        except queue.Empty:
            item = None
        if item is EOF:
            return
        if item is None and killer.process.poll() is not None:
            # Its output stays open while a process it started runs on (one no signal to its
            # tree reached): the run ends with its main process, not with such a stray.
            ended_at = ended_at or time.monotonic()
            if time.monotonic() - ended_at > OUTPUT_AFTER_EXIT_S:
                logs.add(
                    f"[headway] the trial's process ended {OUTPUT_AFTER_EXIT_S:g} s ago but "
                    "processes it started still hold its output open: no longer read"
                )
                return
        if isinstance(item, str):
            logs.add(item)
        elif isinstance(item, tuple):  # (line, its position: line number or offset past it)
            logs.add(*item)
        now = time.monotonic()
        if now - last_flush >= flush_every or len(logs.pending) >= LOG_BATCH:
            # No pending line: no call, so an outage's clock is not reset by a no-op flush.
            if not logs.pending or attempt(logs.flush):
                attempt(on_flush)
            last_flush = now
        if now - last_beat >= beat_every and attempt(beat):
            last_beat = now
        if master.exceeded and not killer.scheduled:
            logs.add(
                f"[headway] the master was unreachable for {master.budget:g} s "
                f"({master.last_error}): stopping the trial (its run is re-queued)"
            )
            killer.schedule()
        message = killer.escalate()
        if message:
            logs.add(message)


def supervise(
    spec: wire.LaunchSpec,
    killer: supervision.ProcessGroupKiller,
    lines: queue.Queue[object],
    logs: LogWriter,
    watch: distributed.ShareWatch | None = None,
    lease: leases.Lease | None = None,
) -> None:
    """Copy output to the logs, heartbeat, and signal the process when a kill is due (a kill
    request in a heartbeat's answer, the run ended by the master while this host could not
    reach it, or another host of the run failing)."""
    kill = threading.Event()

    stale = threading.Event()

    def beat() -> None:
        status = link.api().run_heartbeat(spec.trial_id, spec.run_id)
        if status.state == "EXITED":
            stale.set()  # the master ended it while this host could not reach it (fencing)
        elif status.stop_requested == "kill":
            kill.set()

    def check_kill() -> None:
        if not killer.scheduled and stale.is_set():
            logs.add(
                f"[headway] the master ended run {spec.run_id} (lost) while this host could not "
                "reach it: stopping this copy's processes"
            )
            killer.schedule()
        if not killer.scheduled and kill.is_set():
            logs.add("[headway] kill requested")
            killer.schedule()
        message = watch.check() if watch is not None and not killer.scheduled else None
        if message:
            logs.add(message)
            killer.schedule()

    _pump_output(killer, lines, logs, on_flush=check_kill, on_beat=beat, lease=lease)


def supervise_share(
    spec: wire.LaunchSpec,
    killer: supervision.ProcessGroupKiller,
    lines: queue.Queue[object],
    logs: LogWriter,
    lease: leases.Lease | None = None,
) -> None:
    """A share's loop: logs and heartbeat as the chief's; its ranks are stopped when the run is
    killed or the master ended the share while this host could not reach it at once, and when
    the run ended (the chief's ranks are gone) after the grace time."""
    gone = {"state": ""}

    def beat() -> None:
        gone["state"] = distributed.run_gone(spec)

    def check_run() -> None:
        if killer.scheduled:
            return
        if gone["state"] == "kill":
            logs.add(f"[headway] node {spec.node_rank}: kill requested")
            killer.schedule()
        elif gone["state"] == "stale":
            logs.add(
                f"[headway] the master ended node {spec.node_rank} of run {spec.run_id} (lost) "
                "while this host could not reach it: stopping this copy's processes"
            )
            killer.schedule()
        elif gone["state"] == "ended":
            logs.add(f"[headway] node {spec.node_rank}: the run ended on the chief host")
            killer.schedule(delay=settings.HEADWAY_KILL_GRACE_SECONDS)

    _pump_output(killer, lines, logs, on_flush=check_run, on_beat=beat, lease=lease)
