"""The host agent's state file: what a restarted agent needs to re-attach the runs of the one
that died (``workers.reattach``).

``<HEADWAY_VAR_DIR>/agent-<host name>.json`` holds the agent's identity (its instance id, pid
and the pid's start time: ``headway.exec.procs``) and, per run it may re-attach, where the run
lives and what was already delivered::

    {"agent_id": "...", "pid": 123, "start": 456,
     "runs": {"7-9": {"trial_id": 7, "run_id": 9, "pid": 321, "start": 654,
                      "run_dir": "...", "offset": 1024}}}

``pid``/``start`` of a run name its guard (``headway.exec.guard``), whose pid is the run's
process group; ``offset`` is the byte offset in the run's output file up to which every line
reached the trial's log. The file holds no secret: the host token is the agent's setting, and
the run's calls go with it. It is rewritten whole (a rename, never half-written) on each change,
by one agent process at a time (the master's agent check refuses a second live agent, and a
second agent never writes a live one's file: ``claim``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from headway.exec import procs
from workers.config import settings

logger = logging.getLogger("headway.worker")

OUTPUT = "output.log"  # the run's stdout and stderr, in its run folder
EXIT = "exit.json"  # the guard's record of the trial's exit
AGENT = "agent"  # names the run's current agent for the guard (``pid start``)


@dataclasses.dataclass
class RunEntry:
    """One run a successor may re-attach: ``pid``/``start`` name its guard process."""

    trial_id: int
    run_id: int
    pid: int
    start: int
    run_dir: str
    offset: int = 0

    @property
    def key(self) -> str:
        return f"{self.trial_id}-{self.run_id}"


@dataclasses.dataclass
class AgentState:
    """This agent's identity and the runs it supervises, as kept in the state file."""

    agent_id: str
    pid: int
    start: int
    runs: dict[str, RunEntry] = dataclasses.field(default_factory=dict)


def path(host: str | None = None) -> Path:
    """The state file of host ``host`` (default ``HEADWAY_HOST_NAME``)."""
    return settings.VAR_DIR / f"agent-{host or settings.HEADWAY_HOST_NAME}.json"


def load(host: str | None = None) -> AgentState | None:
    """The state file's content; None when there is none or it cannot be read (logged)."""
    target = path(host)
    try:
        raw: dict[str, Any] = json.loads(target.read_text())
        runs = {}
        for item in raw.get("runs", {}).values():
            entry = RunEntry(**item)
            runs[entry.key] = entry
        return AgentState(str(raw["agent_id"]), int(raw["pid"]), int(raw["start"]), runs)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        logger.exception("unreadable agent state file %s: ignored", target)
        return None


_current: AgentState | None = None
_lock = threading.Lock()


def _save() -> None:
    # Called with _lock held.
    if _current is None:
        return
    body = dataclasses.asdict(_current)
    try:
        target = path()
        target.parent.mkdir(parents=True, exist_ok=True)
        procs.write_atomic(target, json.dumps(body) + "\n")
    except OSError:
        logger.exception("could not write the agent state file")


def claim(fresh_id: str) -> tuple[str, list[RunEntry]]:
    """Decide this agent process's instance id at start; return it and the runs to re-attach.

    When the state file names an agent that no longer runs (its pid ended, or was reused: the
    start time differs), this one takes over its id (the master accepts a heartbeat of the same
    instance at once) and its runs, and the file now names this process. When it names a live
    agent (a second agent of the host), ``fresh_id`` is returned, the file is left alone, and
    the master will refuse this one (409). Without a file: ``fresh_id``, no runs.
    """
    global _current
    me = os.getpid()
    start = procs.process_start(me) or 0
    previous = load()
    with _lock:
        if (
            previous is not None
            and previous.pid != me
            and procs.is_alive(previous.pid, previous.start)
        ):
            return fresh_id, []
        agent_id = previous.agent_id if previous is not None else fresh_id
        runs = dict(previous.runs) if previous is not None else {}
        _current = AgentState(agent_id, me, start, runs)
        _save()
    return agent_id, list(runs.values())


def active() -> bool:
    """Whether this process keeps a state file (a Celery agent that claimed its identity)."""
    return _current is not None


def add_run(entry: RunEntry) -> None:
    """Record a run a successor may re-attach (no-op without ``claim``)."""
    with _lock:
        if _current is not None:
            _current.runs[entry.key] = entry
            _save()


def delivered(trial_id: int, run_id: int, offset: int) -> None:
    """Every line of the run's output up to byte ``offset`` reached the trial's log."""
    with _lock:
        entry = _current.runs.get(f"{trial_id}-{run_id}") if _current is not None else None
        if entry is not None and offset > entry.offset:
            entry.offset = offset
            _save()


def remove_run(trial_id: int, run_id: int) -> None:
    """The run's exit was reported (or it was given up): nothing to re-attach."""
    with _lock:
        if _current is not None and _current.runs.pop(f"{trial_id}-{run_id}", None) is not None:
            _save()


def reset() -> None:
    """Forget this process's state (tests; the file stays)."""
    global _current
    with _lock:
        _current = None
