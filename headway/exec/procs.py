"""Naming a process so that a reused pid is not mistaken for it, and small atomic files.

A pid alone names a process only while it lives: after its end the kernel may give the number
to another one. ``(pid, start)``, with ``start`` the process's start time in clock ticks since
boot (field 22 of ``/proc/<pid>/stat``, the pair systemd and ``ps`` rely on), names it for good
on one boot. Linux only (``/proc``); elsewhere no process is found.
"""

from __future__ import annotations

import os
from pathlib import Path


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot); None when there is no such
    live process (a zombie counts as ended: it only waits for its parent to read its status)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_alive(pid: int, start: int) -> bool:
    """Whether the process named ``(pid, start)`` still runs (not a later holder of ``pid``)."""
    return pid > 0 and process_start(pid) == start


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader sees the old
    or the new content, never half of it. Raises ``OSError``."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.{os.getpid()}.new")
    partial.write_text(text)
    os.replace(partial, target)


def read_agent(path: str | os.PathLike[str] | None) -> tuple[int, int] | None:
    """The ``(pid, start)`` of the agent named in a run's agent file (``pid start`` on one
    line); None when there is no file or it cannot be read."""
    if not path:
        return None
    try:
        pid, start = Path(path).read_text().split()[:2]
        return int(pid), int(start)
    except (OSError, ValueError):
        return None
