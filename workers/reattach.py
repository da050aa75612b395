"""Re-attaching a one-host run after its host agent was killed and started again.

A run held by one host (no shares) whose agent keeps a state file (``workers.agent_state``: a
Celery agent) is started so that it can outlive its agent:

- its stdout and stderr go to ``<run dir>/output.log`` instead of a pipe to the agent (a dead
  reader would break the trial's next print), and the agent tails the file (``tail``), noting
  in the state file the offset up to which lines reached the trial's log;
- its guard (``headway.exec.guard``) waits ``HEADWAY_REATTACH_SECONDS`` after the agent's death
  for a new agent to name itself in ``<run dir>/agent`` before stopping it, and writes the
  trial's exit to ``<run dir>/exit.json`` (a re-attaching agent is not the guard's parent).

A restarted agent of the same host and ``HEADWAY_VAR_DIR`` finds the previous instance gone
(``agent_state.claim``), takes its instance id (the master accepts the same instance's
heartbeat at once, where a different one would wait for the host timeout), holds the leases of
its runs before its first heartbeat (which renews them on the master), and re-attaches each run
(``adopt``): it names itself to the guard, tails the output from the delivered offset (no line
lost or sent twice), heartbeats the run, kills it when asked, and reports its exit as the first
agent would have. A run whose guard ended meanwhile is reported from its exit file (or as lost,
re-queued without a restart, when the guard stopped it or left no file).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

from headway.exec import procs
from headway.exec.guard import lease_end
from headway.exec.loglines import clean_line
from workers import agent_state, leases, link, outage, supervision
from workers.agent_state import AGENT, EXIT, OUTPUT, RunEntry
from workers.config import settings
from workers.run_loop import EOF, LogWriter, supervise

logger = logging.getLogger("headway.worker")

POLL_S = 0.1  # how often the tail looks for new output


def name_agent(run_dir: Path) -> None:
    """Name this process as the run's agent for its guard (``<run dir>/agent``)."""
    me = os.getpid()
    procs.write_atomic(run_dir / AGENT, f"{me} {procs.process_start(me) or 0}\n")


def read_exit(run_dir: Path) -> tuple[int | None, str] | None:
    """The guard's record of the trial's exit: ``(code, why the guard stopped it or "")``;
    None while there is none."""
    try:
        raw = json.loads((run_dir / EXIT).read_text())
        return int(raw["code"]), str(raw.get("stopped") or "")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return (None, "unreadable exit file")


class AdoptedProcess:
    """A run's guard this agent did not start: ``pid`` (its process group) named with its
    ``start`` time; its exit read from the guard's exit file (as ``Popen``'s ``poll``/``wait``)."""

    def __init__(self, pid: int, start: int, run_dir: Path) -> None:
        self.pid = pid
        self.start = start
        self.run_dir = run_dir
        self.stopped = ""  # why the guard stopped the trial, once ended

    def poll(self) -> int | None:
        """The exit code once the guard ended (-9 when it left no exit file), else None."""
        if procs.is_alive(self.pid, self.start):
            return None
        record = read_exit(self.run_dir)
        if record is None:
            # Ended without writing its record (SIGKILLed): the file may still be landing.
            time.sleep(POLL_S)
            record = read_exit(self.run_dir) or (-9, "its guard ended without an exit record")
        code, self.stopped = record
        return -9 if code is None else code

    def wait(self) -> int:
        """Block until the guard ended; its exit code."""
        while (code := self.poll()) is None:
            time.sleep(POLL_S)
        return code


def tail(
    path: Path,
    offset: int,
    ended: Callable[[], bool],
    lines: queue.Queue[object],
    limit: int | None = None,
) -> None:
    """Thread body: put each line of the file ``path`` from byte ``offset`` on ``lines`` as
    ``(text, offset just past it)`` until ``ended()`` and the file is read to its end, then
    ``EOF``. An unended last line waits for its newline until ``ended()``; a line longer than
    ``limit`` characters (``HEADWAY_MAX_LOG_LINE_CHARS``) is cut as ``clean_line`` cuts it."""
    limit = limit or settings.HEADWAY_MAX_LOG_LINE_CHARS
    cap = 4 * limit + 4  # UTF-8: at most 4 bytes a character
    try:
        stream = open(path, "rb")  # noqa: SIM115 (closed below; a missing file ends the tail)
    except OSError:
        logger.error("cannot read the run's output %s: its remaining lines are lost", path)
        lines.put(EOF)
        return
    with stream:
        stream.seek(offset)
        state = {"finished": False}

        def wait() -> bool:
            # Wait for more output; False once the process ended and all of it was read.
            if state["finished"]:
                return False
            if ended():
                state["finished"] = True  # read once more: all it wrote is in the file now
            else:
                time.sleep(POLL_S)
            return True

        while True:
            start = stream.tell()
            chunk = stream.readline(cap)
            if chunk.endswith(b"\n") or (chunk and state["finished"]):
                lines.put((clean_line(_text(chunk), limit), stream.tell()))
                continue
            if len(chunk) >= cap:
                # Overlong: keep its head, count the rest up to the newline (never held whole,
                # as headway.exec.loglines.read_lines does for a pipe).
                head, dropped = _text(chunk), 0
                while True:
                    rest = stream.readline(cap)
                    dropped += len(_text(rest))
                    if rest.endswith(b"\n") or (not rest and not wait()):
                        break
                lines.put((clean_line(head, limit, total=len(head) + dropped), stream.tell()))
                continue
            stream.seek(start)  # half a line, or nothing yet: wait for the rest
            if not wait():
                lines.put(EOF)
                return


def _text(chunk: bytes) -> str:
    return chunk.removesuffix(b"\n").decode("utf-8", errors="replace")


def hold(entries: list[RunEntry]) -> list[tuple[RunEntry, leases.Lease]]:
    """Hold the leases of the runs to re-attach, before the first heartbeat lists them; each
    counted from the previous agent's last renewal as its guard's lease file has it (the
    monotonic clock is the machine's), or from now."""
    held = []
    now = time.monotonic()
    for entry in entries:
        end = lease_end(str(Path(entry.run_dir) / "lease"))
        renewed = min(now, end - settings.outage_budget()) if end is not None else now
        lease = leases.hold(leases.RUN, entry.trial_id, entry.run_id, 0, renewed)
        held.append((entry, lease))
    return held


def release(held: list[tuple[RunEntry, leases.Lease]]) -> None:
    """This agent will not re-attach them after all (the master refused it)."""
    for _entry, lease in held:
        leases.release(lease)


def start(held: list[tuple[RunEntry, leases.Lease]]) -> list[threading.Thread]:
    """Re-attach each run from a daemon thread (``adopt``); return the threads."""
    threads = []
    for entry, lease in held:
        thread = threading.Thread(
            target=_adopt_logged, args=(entry, lease), name=f"headway-adopt-{entry.key}"
        )
        thread.daemon = True
        thread.start()
        threads.append(thread)
    return threads


def _adopt_logged(entry: RunEntry, lease: leases.Lease) -> None:
    try:
        adopt(entry, lease)
    except Exception:
        # Left to the master's lost-run reaper (its lease lapses): not tried again.
        logger.exception("trial %s run %s: re-attaching failed", entry.trial_id, entry.run_id)
    finally:
        leases.release(lease)
        agent_state.remove_run(entry.trial_id, entry.run_id)


def adopt(entry: RunEntry, lease: leases.Lease) -> int | None:
    """Supervise a run the previous agent of this host started, to its end; report its exit
    (``workers.runner.report_exit``) and return the code reported."""
    from workers import runner

    trial_id, run_id = entry.trial_id, entry.run_id
    run_dir = Path(entry.run_dir)
    alive = procs.is_alive(entry.pid, entry.start)
    if not alive and not run_dir.exists():
        # The previous agent reported its exit 0 and cleaned the folder, then died before it
        # forgot the run: nothing is left to send.
        logger.info("trial %s run %s: ended and cleaned up already", trial_id, run_id)
        return None
    process = AdoptedProcess(entry.pid, entry.start, run_dir)
    logs = LogWriter(
        trial_id,
        run_id,
        on_delivered=lambda offset: agent_state.delivered(trial_id, run_id, offset),
    )
    if alive:
        name_agent(run_dir)  # the guard keeps the trial from now on
        lease.publish(run_dir / "lease")
    logger.warning(
        "trial %s run %s: re-attached (its process %s), from output offset %s",
        trial_id, run_id, "runs" if alive else "has ended", entry.offset,
    )  # fmt: skip
    logs.add(
        f"[headway] run {run_id} re-attached by a restarted agent (pid {os.getpid()}): "
        f"its process {'still runs' if alive else 'ended meanwhile'}"
    )
    budget = max(settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS, settings.outage_budget())
    spec = outage.retry_master(
        lambda: link.api().run_spec(trial_id, run_id), budget=budget, what="run spec"
    )
    lines: queue.Queue[object] = queue.Queue()
    threading.Thread(
        target=tail,
        args=(run_dir / OUTPUT, entry.offset, lambda: process.poll() is not None, lines),
        daemon=True,
    ).start()
    killer = supervision.ProcessGroupKiller(process, settings.HEADWAY_KILL_GRACE_SECONDS)  # type: ignore[arg-type]
    supervision.register(trial_id, run_id, killer)
    leases.attach(lease, killer, logs.add)
    try:
        supervise(spec, killer, lines, logs, lease=lease)
    finally:
        supervision.unregister(trial_id, run_id)
    code: int | None = process.wait()
    reason = ""
    if process.stopped:
        logs.add(f"[headway] {process.stopped}")
        code, reason = None, f"host {settings.HEADWAY_HOST_NAME}: {process.stopped}"
    return runner.report_exit(trial_id, run_id, lease, logs, code, reason, None, run_dir)
