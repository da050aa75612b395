"""Looking inside a namespaced test host (tests/netns_cluster.py): its processes, a trial's
processes and environments, its agent's environment, commands run in its network namespace.

A mixin of ``NetnsCluster``: it needs ``self.hosts`` (name -> ``Host``: ``namespace``,
``worker``, ``log``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.netns_master import run_checked


class HostProcesses:
    """Process inspection of the cluster's hosts (see module)."""

    hosts: dict

    def pids(self, name: str) -> list[int]:
        """Every process running in host ``name``'s network namespace."""
        out = run_checked(["ip", "netns", "pids", self.hosts[name].namespace]).stdout
        return [int(p) for p in out.split()]

    def trial_processes(self, name: str, trial_id: int) -> list[tuple[int, set[bytes]]]:
        """``(pid, environment entries)`` of the live processes of trial ``trial_id`` in host
        ``name``'s namespace (guard, launcher, ranks: every process started with its
        ``HEADWAY_TRIAL_ID``); zombies left out."""
        found = []
        for pid in self.pids(name):
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
                with open(f"/proc/{pid}/environ", "rb") as env:
                    environ = set(env.read().split(b"\0"))
            except OSError:
                continue
            if f"HEADWAY_TRIAL_ID={trial_id}".encode() in environ:
                found.append((pid, environ))
        return found

    def agent_environ(self, name: str) -> dict[str, str]:
        """The environment host ``name``'s running agent process started with (``ip netns
        exec``, ``unshare``, ``sh`` and ``python -m workers`` exec each other: one pid)."""
        worker = self.hosts[name].worker
        if worker is None or worker.poll() is not None:
            raise RuntimeError(f"host {name}'s agent is not running (log: {self.hosts[name].log})")
        raw = Path(f"/proc/{worker.pid}/environ").read_bytes()
        items = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
        return {key.decode(): value.decode() for key, value in items}

    def run_in(self, name: str, cmd: Sequence[str]) -> subprocess.CompletedProcess:
        """Run ``cmd`` in host ``name``'s network namespace (not its worker's other ones)."""
        return run_checked(["ip", "netns", "exec", self.hosts[name].namespace, *cmd])
