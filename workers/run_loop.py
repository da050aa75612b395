"""A running trial process's loop on its host: output to the trial's log, heartbeats, kills.

``workers.runner`` starts the process (its own process group, under ``headway.exec.guard``),
then calls ``supervise`` (the chief's part of a run) or ``supervise_share`` (another host's part)
until the process's output ends. The loop copies output lines into ``TrialLog`` rows in batches
(``LogWriter``), renews the run's lease with each heartbeat (``workers.leases``), checks for a
kill request or a failed host of the run, and escalates a scheduled kill (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.utils import timezone

from headway.exec.loglines import clean_line, read_lines
from registry import lifecycle
from registry.models import RunShare, StopReason, TrialLog, TrialRun
from workers import db_outage, distributed, leases, supervision

EOF = object()  # put on the lines queue after the process's last line
_LOG_INSERT_BATCH = 500  # rows an INSERT: bounds one statement's size (lines are cut too)


def pump(stream, lines: queue.Queue) -> None:
    """Thread body: put each line of ``stream`` (NUL-free, cut to the line limit) on ``lines``,
    then ``EOF``."""
    for line in read_lines(stream, settings.HEADWAY_MAX_LOG_LINE_CHARS):  # NUL-free, cut
        lines.put(line)
    lines.put(EOF)


class LogWriter:
    """Batches a run's output lines into ``TrialLog`` rows (few inserts, bounded delay).

    Thread-safe: the lease watchdog adds lines too (workers/leases.py). A failed flush keeps its
    lines for the next one."""

    def __init__(self, trial_id: int, run_id: int) -> None:
        self.trial_id = trial_id
        self.run_id = run_id
        self.pending: list[TrialLog] = []
        self._lock = threading.Lock()

    def add(self, message: str) -> None:
        line = TrialLog(
            trial_id=self.trial_id,
            run_id=self.run_id,
            message=clean_line(message, settings.HEADWAY_MAX_LOG_LINE_CHARS),
            timestamp=timezone.now(),
        )
        with self._lock:
            self.pending.append(line)

    def flush(self) -> None:
        with self._lock:
            batch, self.pending = self.pending, []
        if not batch:
            return
        try:
            TrialLog.objects.bulk_create(batch, batch_size=_LOG_INSERT_BATCH)
        except BaseException:
            with self._lock:
                self.pending[:0] = batch  # in order, before what came meanwhile
            raise


def _stop_requested(run: TrialRun) -> str:
    row = TrialRun.objects.filter(id=run.id).values_list("stop_requested", flat=True).first()
    return row or StopReason.NONE


def _pump_output(
    killer: supervision.ProcessGroupKiller,
    lines: queue.Queue,
    logs: LogWriter,
    *,
    on_flush: Callable[[], None],
    on_beat: Callable[[], object],
    lease: leases.Lease | None = None,
) -> None:
    """Copy output to the logs until the process ends: flush them every
    ``HEADWAY_LOG_FLUSH_SECONDS`` (then ``on_flush()``: is a kill due?), ``on_beat()`` every
    ``HEADWAY_HEARTBEAT_SECONDS``, and escalate a scheduled kill.

    A database outage shorter than ``HEADWAY_HEARTBEAT_TIMEOUT_SECONDS`` is ridden out (lines
    wait in memory, calls are retried: workers/db_outage.py); a longer one stops the process,
    since the reaper may then give its trial to another host."""
    flush_every = settings.HEADWAY_LOG_FLUSH_SECONDS
    last_flush = last_beat = time.monotonic()

    def beat() -> None:
        # A heartbeat renews the run's lease (workers/leases.py) from the moment it started.
        started = time.monotonic()
        on_beat()
        if lease is not None:
            lease.renewed_at(started)

    outage = db_outage.DatabaseOutage(settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS)
    while True:
        try:
            item = lines.get(timeout=flush_every)
        except queue.Empty:
            item = None
        if item is EOF:
            return
        if item is not None:
            logs.add(item)
        now = time.monotonic()
        if now - last_flush >= flush_every or len(logs.pending) >= 500:
            # No pending line: no call, so an outage's clock is not reset by a no-op flush.
            if not logs.pending or outage.attempt(logs.flush):
                outage.attempt(on_flush)
            last_flush = now
        if now - last_beat >= settings.HEADWAY_HEARTBEAT_SECONDS and outage.attempt(beat):
            last_beat = now
        if outage.exceeded and not killer.scheduled:
            logs.add(
                f"[headway] the database was unreachable for {outage.budget:g} s "
                f"({outage.last_error}): stopping the trial (its run is re-queued)"
            )
            killer.schedule()
        message = killer.escalate()
        if message:
            logs.add(message)


def supervise(
    run: TrialRun,
    killer: supervision.ProcessGroupKiller,
    lines: queue.Queue,
    logs: LogWriter,
    watch: distributed.ShareWatch | None = None,
    lease: leases.Lease | None = None,
) -> None:
    """Copy output to the logs, heartbeat, and signal the process when a kill is due (a kill
    request, or another host of the run failing)."""

    def check_kill() -> None:
        if not killer.scheduled and _stop_requested(run) == StopReason.KILL:
            logs.add("[headway] kill requested")
            killer.schedule()
        message = watch.check() if watch is not None and not killer.scheduled else None
        if message:
            logs.add(message)
            killer.schedule()

    _pump_output(
        killer,
        lines,
        logs,
        on_flush=check_kill,
        on_beat=lambda: lifecycle.trial_run_heartbeat(trial_id=run.trial_id, run_id=run.run_id),
        lease=lease,
    )


def supervise_share(
    share: RunShare,
    killer: supervision.ProcessGroupKiller,
    lines: queue.Queue,
    logs: LogWriter,
    lease: leases.Lease | None = None,
) -> None:
    """A share's loop: logs and heartbeat as the chief's; its ranks are stopped when the run is
    killed at once, and when the run ended (the chief's ranks are gone) after the grace time."""

    def check_run() -> None:
        gone = "" if killer.scheduled else distributed.run_gone(share.run_id)
        if gone == "kill":
            logs.add(f"[headway] node {share.node_rank}: kill requested")
            killer.schedule()
        elif gone == "ended":
            logs.add(f"[headway] node {share.node_rank}: the run ended on the chief host")
            killer.schedule(delay=settings.HEADWAY_KILL_GRACE_SECONDS)

    _pump_output(
        killer,
        lines,
        logs,
        on_flush=check_run,
        on_beat=lambda: distributed.share_heartbeat(share),
        lease=lease,
    )
