"""Naming a process so that a reused pid is not mistaken for it, signalling a trial's whole
process tree, and small atomic files.

A pid alone names a process only while it lives: after its end the kernel may give the number
to another one. ``(pid, start)``, with ``start`` the process's start time in clock ticks since
boot (field 22 of ``/proc/<pid>/stat``, the pair systemd and ``ps`` rely on), names it for good
on one boot. Linux only (``/proc``); elsewhere no process is found.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path

import psutil

PR_SET_CHILD_SUBREAPER = 36  # prctl(2), Linux 3.4+


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


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (``prctl(PR_SET_CHILD_SUBREAPER)``):
    a descendant whose parent dies is re-parented here instead of to init, so
    ``signal_descendants`` still finds it (torchrun's ranks after torchrun itself was killed). Returns
    False where the kernel or platform has no such call (nothing changes then)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def live_descendants(pid: int) -> list[int]:
    """The pids of ``pid``'s descendants that have not ended (zombies left out); empty when
    ``pid`` is gone."""
    found = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if child.status() != psutil.STATUS_ZOMBIE:
                    found.append(child.pid)
    return found


def signal_descendants(pid: int, sig: int) -> int:
    """Send ``sig`` to each live descendant of ``pid`` and to every process group they run in,
    except the caller's own group (whose other members only get it one by one); return how many
    descendants there were. Descendants are listed before anything is signalled (a SIGKILL may
    end the parent that still links them). Missing processes are skipped."""
    descendants = live_descendants(pid)
    groups: set[int] = set()
    for child in descendants:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(child))
    groups.discard(os.getpgrp())
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    for child in descendants:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, sig)
    return len(descendants)


def signal_tree(leader: int, sig: int) -> None:
    """Send ``sig`` to every descendant of ``leader`` and the process groups they run in
    (``signal_descendants``), then to the process group ``leader`` leads.

    A trial runs in its own process group, but some launchers move their children out of it:
    torch elastic (``torchrun``) starts each rank in a session of its own
    (``start_new_session=True``), so a signal to the trial's group alone reaches torchrun and
    leaves the ranks running, orphaned, holding the trial's output open.
    """
    signal_descendants(leader, sig)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader, sig)
