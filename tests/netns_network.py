"""The network of a namespaced test cluster (tests/netns_cluster.py): a bridge on a free
``10.213.N.0/24`` with the master's address, and one network namespace per host joined to it
by a veth pair, its name resolving to loopback as on Debian. Only what it creates is recorded
(for ``NetnsCluster.stop`` to remove).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.netns_master import run_checked

SECOND_OCTET = 213  # 10.213.N.0/24: private, and unlikely to be a real network of the machine


@dataclass
class Host:
    """One worker host: its name, namespace, addresses and worker process."""

    name: str
    namespace: str
    address: str
    veth: str  # the bridge-side end; link_down/link_up switch it
    base: Path
    worker: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)
    token: str = ""  # its live host token's key ("" before issuing and once revoked)

    @property
    def log(self) -> Path:
        """The worker's output (appended across restarts)."""
        return self.base / "worker.log"


def hostname(subnet: int, name: str) -> str:
    """Host ``name``'s host name (its UTS namespace) in the cluster on ``subnet``."""
    return f"hw{subnet}-{name}"


def _free_subnet() -> int:
    used = run_checked(["ip", "-o", "-4", "addr", "show"]).stdout
    candidates = [n for n in range(1, 255) if f" 10.{SECOND_OCTET}.{n}." not in used]
    return random.choice(candidates)


def build_network(
    base: Path,
    names: Sequence[str],
    hosts: dict[str, Host],
    made_links: list[str],
    made_namespaces: list[str],
) -> tuple[int, str, str]:
    """Create the bridge and one namespace per host of ``names`` (filling ``hosts``, folders
    under ``base``); record every link and namespace made. Returns ``(subnet, bridge, master
    address)``."""
    subnet = _free_subnet()
    prefix = f"10.{SECOND_OCTET}.{subnet}"
    bridge = f"hwb{subnet}"
    master = f"{prefix}.1"
    run_checked(["ip", "link", "add", bridge, "type", "bridge"])
    made_links.append(bridge)
    run_checked(["ip", "addr", "add", f"{master}/24", "dev", bridge])
    run_checked(["ip", "link", "set", bridge, "up"])
    for index, name in enumerate(names):
        namespace = f"hw{subnet}-{name}"
        veth = f"hw{subnet}v{index}"
        host = Host(
            name=name,
            namespace=namespace,
            address=f"{prefix}.{10 + index}",
            veth=veth,
            base=base / name,
        )
        host.base.mkdir(parents=True, exist_ok=True)
        run_checked(["ip", "netns", "add", namespace])
        made_namespaces.append(namespace)
        etc = Path("/etc/netns") / namespace
        etc.mkdir(parents=True, exist_ok=True)
        # Debian's default: the host name resolves to loopback (the bug to catch).
        (etc / "hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {hostname(subnet, name)}\n")
        run_checked(["ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p"])
        made_links.append(veth)
        run_checked(["ip", "link", "set", veth, "master", bridge])
        run_checked(["ip", "link", "set", veth, "up"])
        run_checked(["ip", "link", "set", f"{veth}p", "netns", namespace])
        inside = ["ip", "netns", "exec", namespace, "ip"]
        run_checked([*inside, "link", "set", f"{veth}p", "name", "eth0"])
        run_checked([*inside, "addr", "add", f"{host.address}/24", "dev", "eth0"])
        run_checked([*inside, "link", "set", "eth0", "up"])
        run_checked([*inside, "link", "set", "lo", "up"])
        hosts[name] = host
    return subnet, bridge, master


def namespace_command(
    namespace: str, host: str, argv: Sequence[str], mounts: Sequence[str] = ()
) -> list[str]:
    """``argv`` run inside network namespace ``namespace`` under host name ``host`` (a UTS
    namespace of its own) and, for each folder of ``mounts``, an empty tmpfs over it (a mount
    namespace of its own)."""
    setup = 'hostname "$1"; shift; '
    for folder in mounts:
        setup += f"mkdir -p '{folder}' && mount -t tmpfs headway-private '{folder}' && "
    script = setup + 'exec "$@"'
    unshare = ["unshare", "--uts"] + (["--mount", "--propagation", "private"] if mounts else [])
    return ["ip", "netns", "exec", namespace, *unshare, "sh", "-c", script, "sh", host, *argv]


def namespace_pids(namespace: str) -> list[int]:
    """Every process in network namespace ``namespace`` (none once it is gone)."""
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def kill_namespace(namespace: str, timeout: float = 30) -> list[int]:
    """SIGKILL every process in network namespace ``namespace``, whatever its process group or
    session (daemons that left theirs), again until none is left: one forked between the
    listing and the kill (a raylet starting a worker) is caught by the next round. Returns the
    pids killed; RuntimeError if processes remain after ``timeout`` seconds."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while pids := namespace_pids(namespace):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} of namespace {namespace} survive SIGKILL")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed += [pid for pid in pids if pid not in killed]
        time.sleep(0.05)
    return killed


def remove_network(links: Sequence[str], namespaces: Sequence[str]) -> None:
    """Delete ``links`` and ``namespaces`` (with their ``/etc/netns`` folders), as recorded by
    ``build_network``; kill the namespaces' processes first. Whatever is already gone is
    skipped."""
    for namespace in namespaces:
        kill_namespace(namespace)
    for link in links:
        subprocess.run(["ip", "link", "del", link], capture_output=True)
    for namespace in namespaces:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        shutil.rmtree(Path("/etc/netns") / namespace, ignore_errors=True)
