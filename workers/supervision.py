"""Supervising trial processes: killing a run's process group, and worker shutdown.

When a worker shuts down (deploy, Ctrl-C, SIGTERM), the runs it is running are preempted like a
pause: the trial checkpoints, acknowledges and exits 0, and the lifecycle re-queues it to resume
on another worker (Determined does the same when an agent goes away). A process that does not
stop within the grace period gets SIGTERM, then SIGKILL, and its run is reported lost, which
also re-queues the trial without counting a restart.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from headway.core._preempt import LISTENING_FILE
from headway.exec import procs
from workers import agent_state, link
from workers.config import settings

logger = logging.getLogger("headway.worker")

# Set to 1 by a batch job's node process (a pool's node entry point) for itself and its
# children: this host agent exists for the one run of its job. The scheduler's warning signal
# (SIGUSR1 before the time limit) reaches every process of the job and is the node process's to
# act on, so trial processes start with it ignored; and the run cannot outlive the job, so no
# agent re-attaches it.
BATCH_JOB_NODE = "HEADWAY_BATCH_JOB_NODE"


def in_batch_job_node() -> bool:
    """Whether this agent is a batch job's node process (``BATCH_JOB_NODE`` is ``1``)."""
    return os.environ.get(BATCH_JOB_NODE) == "1"


class ProcessGroupKiller:
    """SIGTERM to a run's process group when due, then SIGKILL ``grace`` seconds later.

    The process was started in its own session, so its group holds every child it spawned
    (data-loader workers); torchrun's ranks, which run in sessions of their own, are signalled
    through their groups (``headway.exec.procs.signal_tree``): the whole tree goes, even if it
    ignores SIGTERM.
    ``escalate()`` is called from the runner's loop (at least every log-flush interval).
    """

    def __init__(self, process: subprocess.Popen, grace: float) -> None:
        self.process = process
        self.grace = grace
        self.term_at: float | None = None
        self.kill_at: float | None = None
        self.killed = False
        # The runner's loop and the lease watchdog (workers/leases.py) both escalate.
        self._lock = threading.Lock()

    @property
    def scheduled(self) -> bool:
        return self.term_at is not None

    def schedule(self, delay: float = 0.0) -> None:
        """Send SIGTERM ``delay`` seconds from now (an earlier schedule wins)."""
        term_at = time.monotonic() + delay
        with self._lock:
            if self.term_at is None or term_at < self.term_at:
                self.term_at = term_at

    def _signal(self, sig: int) -> None:
        # The groups its descendants moved to too (torchrun's ranks: each in a session of its
        # own), or they would run on orphaned, holding the trial's output open.
        procs.signal_tree(self.process.pid, sig)

    def escalate(self) -> str | None:
        """Send whatever signal is due; return a line for the trial's log when one was sent.

        Thread-safe: each signal is sent once whoever calls first."""
        with self._lock:
            now = time.monotonic()
            if self.term_at is not None and self.kill_at is None and now >= self.term_at:
                self.kill_at = now + self.grace
                self._signal(signal.SIGTERM)
                return "[headway] SIGTERM to the trial's process group"
            if self.kill_at is not None and not self.killed and now >= self.kill_at:
                self.killed = True
                self._signal(signal.SIGKILL)
                return f"[headway] still running {self.grace:g} s after SIGTERM: SIGKILL"
            return None


def guarded(
    command: list[str], lease_file: str | None = None, run_dir: Path | None = None
) -> list[str]:
    """``command`` under ``headway.exec.guard``: the trial's process group is stopped (SIGTERM,
    then SIGKILL after ``HEADWAY_KILL_GRACE_SECONDS``) within about a second of this worker
    process dying, instead of running on unsupervised until the reaper notices; with
    ``lease_file`` (``workers.leases.Lease.publish``), also once the run's lease ended. With
    ``run_dir`` (a run a restarted agent may re-attach: ``workers.reattach``) the group is
    stopped only if no agent re-attached it within ``HEADWAY_REATTACH_SECONDS``, and the
    trial's exit is written to ``run_dir/exit.json``."""
    lease = ["--lease-file", lease_file] if lease_file else []
    if run_dir is not None:
        lease += [
            "--agent-file", str(run_dir / agent_state.AGENT),
            "--reattach", f"{settings.HEADWAY_REATTACH_SECONDS:g}",
            "--exit-file", str(run_dir / agent_state.EXIT),
        ]  # fmt: skip
    # In a batch job the scheduler's USR1 warning reaches the trial too; the node process acts on it.
    warning = ["--ignore-usr1"] if in_batch_job_node() else []
    return [
        sys.executable, "-m", "headway.exec.guard",
        "--parent", str(os.getpid()),
        "--grace", f"{settings.HEADWAY_KILL_GRACE_SECONDS:g}",
        *lease,
        *warning,
        "--", *command,
    ]  # fmt: skip


_active: dict[tuple[int, int, int], ProcessGroupKiller] = {}
_lock = threading.Lock()
shutting_down = threading.Event()


def register(trial_id: int, run_id: int, killer: ProcessGroupKiller, node_rank: int = 0) -> None:
    """Track a running process (a run's chief part, or share ``node_rank``) so worker
    shutdown can preempt it."""
    with _lock:
        _active[(trial_id, run_id, node_rank)] = killer


def unregister(trial_id: int, run_id: int, node_rank: int = 0) -> None:
    """The process ended: nothing to preempt."""
    with _lock:
        _active.pop((trial_id, run_id, node_rank), None)


def _listening(trial_id: int, run_id: int) -> bool:
    """Whether the run's process can checkpoint when preempted: its SDK watches for preemption
    (it created ``LISTENING_FILE`` in the run's directory, ``runner``'s ``trial-T-run-R``), or
    this host runs a share of a multi-host run (``trial-T-run-R-node-N``), whose ranks may be
    needed by the chief's checkpoint."""
    work = settings.HEADWAY_WORK_DIR
    if any(work.glob(f"trial-{trial_id}-run-{run_id}-node-*")):
        return True
    return (work / f"trial-{trial_id}-run-{run_id}" / LISTENING_FILE).exists()


def preempt_all_runs(grace: float) -> int:
    """Worker shutdown: ask every running trial to checkpoint and stop; return how many.

    A process that watches for preemption gets ``grace`` seconds to stop by itself before
    SIGTERM (and SIGKILL after another ``grace``), so the worker's warm shutdown always ends.
    One that does not (still starting: importing, loading data; or not using the SDK) could not
    checkpoint anyway: it gets SIGTERM at once, so ``manage.py serve`` stops within seconds.
    """
    shutting_down.set()
    with _lock:
        running = list(_active.items())
    for (trial_id, run_id, node_rank), killer in running:
        logger.warning("worker shutting down: preempting trial %s run %s", trial_id, run_id)
        if node_rank == 0:
            # The chief's host asks the run to checkpoint; a share's ranks follow the chief.
            try:
                link.api().run_preempt(trial_id, run_id)
            except Exception:
                logger.exception("could not ask trial %s run %s to stop", trial_id, run_id)
        killer.schedule(delay=grace if _listening(trial_id, run_id) else 0.0)
    return len(running)
