"""Stop a trial whose worker died: ``python -m headway.exec.guard --parent PID -- command...``.

The worker starts every trial process through this guard (the security review found that "after a
worker is killed its trial runs unsupervised for 60-90 s"). The guard runs ``command`` as its child
in its own process group (the one the worker made for the run) and watches its parent: once the
worker ``PID`` is no longer its parent (the worker was killed: the guard was re-parented), it sends
SIGTERM to the whole group, and SIGKILL ``--grace`` seconds later if the trial still runs (the
groups its descendants moved to as well, such as torchrun's ranks: ``procs.signal_descendants``). It
checks once per ``--interval`` seconds from a sleeping thread (no busy loop), so a trial stops
within about ``interval`` seconds of its worker's death; the lost-run reaper re-queues it.

With ``--lease-file PATH`` it also enforces the run's lease: the worker writes there
the ``time.monotonic()`` at which the lease ends, again at each renewal; ``BACKSTOP_DELAY_S``
after that time the guard stops the group the same way. The worker's own watchdog does that
first, at the lease's end, and says why in the worker's and the trial's logs
(``workers/leases.py``); the guard is the backstop for a worker that is alive but frozen
(stopped, or stuck), so no rank outlives its lease by more than ``BACKSTOP_DELAY_S`` +
``--grace``, well inside the registry's margin (``HEADWAY_LEASE_MARGIN_SECONDS`` is the grace
plus 5 s). A missing or unreadable file changes nothing (a run started before its lease was
published).

With ``--ignore-usr1`` the trial's processes inherit SIGUSR1 ignored (a handler the trial
installs still gets it): inside a batch scheduler's job, the scheduler's warning signal before
the time limit reaches every process of the job, and only the job's node process acts on it, by
asking the trial to checkpoint and stop; without this its default action would end them.

With ``--agent-file PATH --reattach S`` (a one-host run, ``workers.reattach``) the trial may
outlive its agent: PATH names the agent that supervises the run (``pid start``, written by the
agent that started it and again by each agent that re-attaches it); when the parent is gone and
the agent named there does not run either, the guard waits up to ``S`` seconds for a restarted
agent to name itself there, and stops the group as above only if none does. With
``--exit-file PATH`` the guard writes the trial's exit as JSON (``{"code": N, "stopped": why}``,
``why`` empty unless the guard stopped it) before it exits: an agent that re-attached the run
is not its parent and cannot wait for its status.

Processes of the trial that outlive its main process (ranks whose launcher died first: the
guard is their subreaper, so they are re-parented to it) are stopped the same way before the
guard exits, so nothing of a trial runs on unsupervised.

Signals the worker sends to the group (kill, preemption escalation) reach the trial directly;
the guard ignores SIGTERM and SIGINT itself and ends with the trial's exit status (a trial
killed by signal N ends the guard by signal N too), so the worker sees what it saw before.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

from headway.exec import procs


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m headway.exec.guard")
    parser.add_argument("--parent", type=int, required=True, help="the worker's pid")
    parser.add_argument("--grace", type=float, default=10.0, help="seconds SIGTERM -> SIGKILL")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between checks")
    parser.add_argument(
        "--lease-file", default=None, help="where the worker writes the lease's end"
    )
    parser.add_argument("--agent-file", default=None, help="names the run's current agent")
    parser.add_argument(
        "--reattach", type=float, default=0.0, help="seconds a new agent has to re-attach"
    )
    parser.add_argument("--exit-file", default=None, help="where the trial's exit is written")
    parser.add_argument(
        "--ignore-usr1", action="store_true", help="start the trial with SIGUSR1 ignored"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the trial command")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given after --")
    return args


def _say(message: str) -> None:
    with contextlib.suppress(OSError):  # nobody reads the pipe any more: the worker is gone
        print(f"[headway] {message}", file=sys.stderr, flush=True)


# Seconds the guard leaves the worker's watchdog to act (and log why) after the lease's end
# before it stops the group itself: the two racing at the same instant hid the worker's reason.
BACKSTOP_DELAY_S = 2.0


def lease_end(path: str | None) -> float | None:
    """The ``time.monotonic()`` at which the run's lease ends, from the worker's file; None when
    there is no file (yet) or it cannot be read."""
    if not path:
        return None
    try:
        with open(path) as file:
            return float(file.read().strip())
    except (OSError, ValueError):
        return None


class _Supervisor:
    """Whether the run still has an agent: its parent, or the one its agent file names (one
    that re-attached it); how long it has had none."""

    def __init__(self, parent: int, agent_file: str | None, reattach: float) -> None:
        self.parent = parent
        self.agent_file = agent_file
        self.reattach = reattach if agent_file else 0.0
        self.orphaned_at: float | None = None

    def gone(self) -> str | None:
        """Why the run has no agent any more (None while it has one or may get one)."""
        if os.getppid() == self.parent:
            return None
        named = procs.read_agent(self.agent_file)
        if named is not None and procs.is_alive(*named):
            self.orphaned_at = None  # re-attached (or adopted again after another restart)
            return None
        now = time.monotonic()
        if self.orphaned_at is None:
            self.orphaned_at = now
        if now - self.orphaned_at < self.reattach:
            return None
        if self.reattach:
            return f"the worker is gone and no agent re-attached the run within {self.reattach:g} s"
        return f"the worker (pid {self.parent}) is gone"


def _why_stop(supervisor: _Supervisor, lease_file: str | None) -> str | None:
    gone = supervisor.gone()
    if gone:
        return gone
    end = lease_end(lease_file)
    if end is not None and time.monotonic() > end + BACKSTOP_DELAY_S:
        return "the run's lease expired and its worker did not stop it"
    return None


_stopped = {"why": ""}  # set by the watching thread when it stops the trial


def _signal_trial(sig: int) -> None:
    # The guard's descendants first, wherever a launcher moved them (torchrun's ranks: a
    # session each), then the run's whole group, the guard included.
    procs.signal_descendants(os.getpid(), sig)
    os.killpg(os.getpgrp(), sig)


def _watch(
    child: subprocess.Popen[bytes],
    supervisor: _Supervisor,
    grace: float,
    interval: float,
    lease_file: str | None = None,
) -> None:
    """Thread body: when the worker is gone (or the lease ended), stop the run's process group."""
    while child.returncode is None:
        time.sleep(interval)
        why = _why_stop(supervisor, lease_file)
        if why is None:
            continue
        _stopped["why"] = why
        _say(f"{why}: stopping the trial (SIGTERM)")
        _signal_trial(signal.SIGTERM)  # the guard ignores it; the trial not
        deadline = time.monotonic() + grace
        while child.returncode is None and time.monotonic() < deadline:
            time.sleep(min(interval, 0.5))
        if child.returncode is None:
            _signal_trial(signal.SIGKILL)
        return


def _stop_strays(grace: float) -> None:
    # Processes the trial left behind when its main process ended (ranks whose launcher died
    # first, re-parented here as this guard is their subreaper) would run on unsupervised and
    # hold the trial's output open: they end with the trial, SIGTERM then SIGKILL.
    if not procs.live_descendants(os.getpid()):
        return
    _say("processes of the trial outlived it: stopping them (SIGTERM)")
    procs.signal_descendants(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while procs.live_descendants(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.1)
    if procs.live_descendants(os.getpid()):
        _say(f"still running {grace:g} s after SIGTERM: SIGKILL")
        procs.signal_descendants(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    """Run the command under the guard; return its exit status (see the module docstring)."""
    args = _parse(argv)
    if args.ignore_usr1:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # inherited through exec (see module)
    # Ranks a launcher started in sessions of their own stay this process's descendants even
    # when the launcher dies first, so a stop reaches them (``procs.signal_descendants``).
    procs.become_subreaper()
    child = subprocess.Popen(args.command)
    # Ignored only after the child started: ignored dispositions would be inherited by it. A
    # SIGTERM to the group before this line ends both, as it would have ended the trial alone.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(
        target=_watch,
        args=(
            child,
            _Supervisor(args.parent, args.agent_file, args.reattach),
            args.grace,
            args.interval,
            args.lease_file,
        ),
        name="headway-guard",
        daemon=True,
    ).start()
    code = child.wait()
    _stop_strays(args.grace)
    if args.exit_file:
        exit_record = json.dumps({"code": code, "stopped": _stopped["why"]})
        try:
            procs.write_atomic(args.exit_file, exit_record + "\n")
        except OSError as exc:
            _say(f"could not write the trial's exit to {args.exit_file}: {exc}")
    if code < 0:  # killed by a signal: end the same way
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those cannot be handled anyway
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)  # the signal is delivered meanwhile
    return code


if __name__ == "__main__":
    sys.exit(main())
