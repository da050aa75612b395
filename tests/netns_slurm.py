"""A Slurm cluster of namespaced hosts: its own ``slurmctld`` on the master's bridge address and
one ``slurmd`` per host of a ``NetnsCluster`` (each in the host's network and UTS namespaces, so
Slurm sees nodes on their own addresses and names), sharing this machine's ``munged``.

It has its own ``slurm.conf`` (``SLURM_CONF``: pass ``conf`` to whatever calls Slurm's
commands), ports and state folder under ``base``, so the one-node test cluster
(``deploy/slurm/test-cluster.sh``) keeps running beside it. Start it after the
``NetnsCluster`` (built with ``agents=False``); ``stop()`` ends its daemons (the cluster's own
``stop()`` does too: they are its processes).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.helpers import wait_for
from tests.netns_cluster import NetnsCluster

PARTITION = "nodes"


def _free_ports(count: int) -> list[int]:
    # Ports free on every address of the root namespace (slurmctld binds all of them).
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("0.0.0.0", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _cgroup_mounts() -> str:
    """Shell commands that mount the cgroup file systems as this machine has them (v1
    hierarchies on a tmpfs, or one cgroup2), for a namespace whose /sys is its own."""
    commands = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if not point.startswith("/sys/fs/cgroup"):
            continue
        if kind == "tmpfs":
            commands.append(f"mount -t tmpfs tmpfs {point};")
        elif kind in ("cgroup", "cgroup2"):
            wanted = [
                o
                for o in options.split(",")
                if o not in ("rw", "ro", "relatime", "nosuid", "nodev", "noexec")
            ]
            opts = f"-o {','.join(wanted)} " if kind == "cgroup" and wanted else ""
            commands.append(f"mkdir -p {point}; mount -t {kind} {opts}{kind} {point};")
    return " ".join(commands)


class NetnsSlurm:
    """``slurmctld`` + one ``slurmd`` per host of ``cluster`` (see module).

    Attributes:
        conf (Path): the cluster's ``slurm.conf``.
        env (dict[str, str]): ``SLURM_CONF`` for Slurm's commands.
        nodes (dict[str, str]): host name in the ``NetnsCluster`` -> Slurm node name.
    """

    def __init__(self, cluster: NetnsCluster, base: Path, cpus: int) -> None:
        self.cluster = cluster
        self.base = Path(base)
        self.cpus = cpus
        self.conf = self.base / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self.nodes = {name: cluster.host_command(name, [])[-1] for name in cluster.names}

    def _write_conf(self) -> None:
        ctld_port, slurmd_port = _free_ports(2)
        state = self.base / "state"
        state.mkdir(parents=True, exist_ok=True)
        lines = [
            "ClusterName=headway-netns",
            # The controller's name must be this machine's own (slurmctld checks it).
            f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.cluster.master})",
            "SlurmUser=root",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "AuthType=auth/munge",
            f"StateSaveLocation={state}",
            f"SlurmdSpoolDir={self.base}/spool-%n",
            f"SlurmctldPidFile={self.base}/slurmctld.pid",
            f"SlurmdPidFile={self.base}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.base}/slurmctld.log",
            f"SlurmdLogFile={self.base}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "MinJobAge=3600",
            "KillWait=10",
        ]
        for name, node in self.nodes.items():
            address = self.cluster.hosts[name].address
            lines.append(f"NodeName={node} NodeAddr={address} CPUs={self.cpus} State=UNKNOWN")
        nodes = ",".join(self.nodes.values())
        lines.append(
            f"PartitionName={PARTITION} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP"
        )
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        """Write the config, start the daemons, wait until every node is idle."""
        self._write_conf()
        env = {**os.environ, **self.env}
        self.cluster.spawn(["slurmctld", "-D", "-f", str(self.conf)], self.base / "ctld.out", env)
        for name, node in self.nodes.items():
            (self.base / f"spool-{node}").mkdir(exist_ok=True)
            # `ip netns exec` mounts a sysfs of the namespace's own, without /sys/fs/cgroup,
            # which slurmd's cgroup plugin reads at start even with proctrack/linuxproc.
            script = f"{_cgroup_mounts()} exec slurmd -D -f '{self.conf}'"
            cmd = self.cluster.host_command(name, ["sh", "-c", script])
            self.cluster.spawn(cmd, self.base / f"slurmd-{name}.out", env)

        def idle() -> bool:
            out = self.sinfo("-h", "-o", "%n %T")
            states = dict(line.split() for line in out.splitlines() if line.strip())
            return all(states.get(node) == "idle" for node in self.nodes.values())

        wait_for(idle, 90, f"the namespaced Slurm nodes to be idle (logs in {self.base})")

    def node_list(self) -> str:
        """Both nodes in Slurm's compressed form (``scontrol show hostlist``), as squeue's
        ``nodes`` reports a job on all of them."""
        done = subprocess.run(
            ["scontrol", "show", "hostlist", ",".join(self.nodes.values())],
            capture_output=True, text=True, timeout=30, env={**os.environ, **self.env}, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def sinfo(self, *args: str) -> str:
        """``sinfo *args`` against this cluster; its stdout ("" when it failed)."""
        done = subprocess.run(
            ["sinfo", *args],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, **self.env},
        )
        return done.stdout if done.returncode == 0 else ""

    @staticmethod
    def write_pools_file(path: Path, settings: Mapping[str, object]) -> Path:
        """A pools file with ``default`` and a slurm pool ``hpc`` on this cluster's partition,
        with ``settings`` (YAML scalars) added to it (written before the master starts)."""
        extra = "".join(f"  {key}: {value}\n" for key, value in settings.items())
        path.write_text(
            f"- {{name: default, type: agent}}\n- name: hpc\n  type: slurm\n  partition: {PARTITION}\n"
            + extra
        )
        return path
