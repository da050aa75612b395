"""A real Ray cluster of namespaced nodes: a head and worker nodes, each ``ray start`` inside a
network namespace of its own on its own address (``tests.netns_network``: a bridge in the root
namespace holding ``master_ip``, one veth per node), for tests of Ray pools and Ray training.

Each node has its own ``--temp-dir`` (short, under ``/tmp``: Ray's unix sockets live there and
their paths must stay under 108 bytes), ``--num-cpus``, no GPUs, an 80 MB object store and the
usage stats off; the head serves the dashboard (Jobs and state API) on all its addresses, so the
root namespace (a Headway master and its Celery worker) reaches it at ``dashboard_url``.

Cleanup ends every process of every node's namespace (``ip netns pids``: whatever its session)
and any process left whose command line names the cluster's temp folder, then removes the
namespaces and links made. It never runs ``ray stop``: that command kills every Ray process of
the machine by name, whatever its network namespace, so it would end the Ray clusters of other
tests running beside this one.

Usage: the module-scoped fixture ``ray_cluster`` (``tests/plugin_processes.py``, the shared fixtures: no
import needed; a head and two workers of 2 CPUs)::

    def test_x(ray_cluster):
        ray_cluster.gcs_address                      # "10.213.N.10:6380"
        ray_cluster.dashboard_url                    # "http://10.213.N.10:8265"
        ray_cluster.start_in(ray_cluster.head, [sys.executable, "driver.py"])
        ray_cluster.kill_node("ray-w2")              # a lost node
        ray_cluster.alive_nodes()                    # ["10.213.N.10", "10.213.N.11"]

or, for another shape, ``with helpers_ray.ray_cluster(workers=1, cpus_per_node=1,
resources={"x": 1}) as cluster:``.
Needs root, ``ip`` and ``unshare`` (``require_netns(master=False)``: a skip, or a failure
under ``CI=true``) and Ray (the ``ray`` extra).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, log_tail, require, wait_for_or_false
from tests.netns_cluster import require_netns
from tests.netns_network import (
    Host,
    build_network,
    hostname,
    kill_namespace,
    namespace_command,
    namespace_pids,
    remove_network,
)

GCS_PORT = 6380  # not Redis's 6379, although the head's namespace has its own ports
DASHBOARD_PORT = 8265
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB
START_TIMEOUT = 240  # seconds for every node to be alive (46 s seen on a loaded 2-core machine)
# The GCS marks a node dead after this many failed health checks this far apart (Ray's defaults,
# 5 x 3 s, make a lost node's test wait ~15 s longer).
HEAD_ENV = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}


@dataclasses.dataclass
class RayNode:
    """One Ray node: its name (``ray-head``, ``ray-w1``..), address and network namespace."""

    name: str
    ip: str
    netns: str


@dataclasses.dataclass
class RayCluster:
    """A running cluster (``ray_cluster()``); nodes reach the root namespace at ``master_ip``.

    Attributes:
        gcs_address: ``IP:PORT`` of the head's GCS (``ray start --address``, ``ray.init``).
        dashboard_url: ``http://IP:8265``, the Jobs and state API, reachable from the root
            namespace.
        master_ip: the root namespace's address on the cluster's bridge, where the nodes reach
            a Headway master listening on it (or on ``0.0.0.0``).
        temp_dir: the cluster's folder: each node's Ray ``--temp-dir`` and ``ray start`` log.
    """

    head: RayNode
    workers: list[RayNode]
    gcs_address: str
    dashboard_url: str
    master_ip: str
    temp_dir: Path = Path()
    hostnames: dict[str, str] = dataclasses.field(default_factory=dict)
    procs: list[subprocess.Popen] = dataclasses.field(default_factory=list)

    @property
    def nodes(self) -> list[RayNode]:
        """The head, then the workers."""
        return [self.head, *self.workers]

    def node(self, name: str) -> RayNode:
        """The node called ``name``; KeyError if none is."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def command(self, node: RayNode, argv: list[str]) -> list[str]:
        """``argv`` as run on ``node``: in its network namespace, under its own host name."""
        return namespace_command(node.netns, self.hostnames[node.name], argv)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment with the repository importable, ``RAY_ADDRESS`` the
        head's GCS, Ray's usage stats and token authentication off, then ``extra``."""
        env = dict(os.environ)
        path = [str(REPO), *filter(None, [env.get("PYTHONPATH")])]
        env.update(
            PYTHONPATH=os.pathsep.join(path),
            RAY_ADDRESS=self.gcs_address,
            RAY_USAGE_STATS_ENABLED="0",
            # Unset, Ray turns token authentication on as soon as ~/.ray/auth_token exists (any
            # local `ray.init()` on the machine writes one), and nodes or drivers that disagree
            # fail with AuthenticationError: one explicit mode for the whole cluster.
            RAY_AUTH_MODE="disabled",
        )
        env.update(extra or {})
        return env

    def start_in(
        self,
        node: RayNode,
        argv: list[str],
        env: dict[str, str] | None = None,
        **popen_kwargs,
    ) -> subprocess.Popen:
        """Start ``argv`` inside ``node``'s namespace (a Ray driver: ``ray.init()`` finds the
        cluster in ``RAY_ADDRESS``) with ``env()`` plus ``env``, in a session of its own unless
        ``popen_kwargs`` say otherwise, from the repository. The cluster's cleanup ends it."""
        popen_kwargs.setdefault("start_new_session", True)
        popen_kwargs.setdefault("cwd", REPO)
        proc = subprocess.Popen(self.command(node, argv), env=self.env(env), **popen_kwargs)
        self.procs.append(proc)
        return proc

    def kill_node(self, name: str) -> None:
        """SIGKILL every process of node ``name`` (its raylet, workers, agents, drivers): a lost
        node. Its namespace and address stay, empty. (The head's loss is the whole cluster's.)"""
        kill_namespace(self.node(name).netns)

    def nodes_state(self) -> list[dict]:
        """Every node the GCS knows (the dashboard's state API ``/api/v0/nodes``): dicts with
        ``node_ip``, ``state`` (``ALIVE``/``DEAD``), ``is_head_node``, ``resources_total``.
        Raises ``OSError`` while the dashboard does not answer."""
        url = f"{self.dashboard_url}/api/v0/nodes?limit=1000&detail=true"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        return list(body["data"]["result"]["result"])

    def alive_nodes(self) -> list[str]:
        """The addresses of the nodes Ray reports alive, sorted ([] while the head's dashboard
        does not answer)."""
        try:
            rows = self.nodes_state()
        except (OSError, ValueError, KeyError):
            return []
        return sorted(row["node_ip"] for row in rows if row.get("state") == "ALIVE")

    def logs(self) -> str:
        """The tail of each node's ``ray start`` output and GCS/raylet logs (a failure's
        explanation)."""
        parts = []
        for node in self.nodes:
            folder = self.temp_dir / node.name
            parts.append(log_tail(folder / "ray-start.log"))
            for name in ("gcs_server.out", "raylet.out"):
                parts += [log_tail(p, 20) for p in folder.glob(f"session_latest/logs/{name}")]
        return "\n".join(parts)


def _ray_executable() -> str:
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else shutil.which("ray") or "ray"


def _start_node(
    cluster: RayCluster, node: RayNode, cpus: int, resources: dict[str, float] | None
) -> subprocess.Popen:
    """``ray start`` on ``node`` (the head when it is ``cluster.head``); returns the process of
    ``ray start`` itself, which exits once the node's daemons run."""
    folder = cluster.temp_dir / node.name
    folder.mkdir(parents=True, exist_ok=True)
    argv = [
        _ray_executable(),
        "start",
        f"--node-ip-address={node.ip}",
        f"--temp-dir={folder}",
        f"--num-cpus={cpus}",
        "--num-gpus=0",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--disable-usage-stats",
    ]
    if resources:
        argv.append(f"--resources={json.dumps(resources)}")
    extra: dict[str, str] = {}
    if node is cluster.head:
        argv += [
            "--head",
            f"--port={GCS_PORT}",
            "--include-dashboard=true",
            "--dashboard-host=0.0.0.0",
            f"--dashboard-port={DASHBOARD_PORT}",
        ]
        extra = HEAD_ENV
    else:
        argv.append(f"--address={cluster.gcs_address}")
    with open(folder / "ray-start.log", "ab") as log:
        return cluster.start_in(node, argv, env=extra, stdout=log, stderr=subprocess.STDOUT)


def ray_pids(temp_dir: Path) -> list[int]:
    """Processes whose command line names ``temp_dir``: the cluster's Ray daemons (GCS,
    raylets, agents, dashboard) and workers, wherever they run."""
    needle = str(temp_dir).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
    return pids


def _stop(
    temp_dir: Path, procs: list[subprocess.Popen], links: list[str], namespaces: list[str]
) -> None:
    """Kill every process of the cluster (its namespaces', then any naming ``temp_dir``), reap
    ``procs`` (those it started), remove the namespaces, links and ``temp_dir``. Raises
    RuntimeError if a process outlives it."""
    for namespace in namespaces:
        kill_namespace(namespace)
    for pid in ray_pids(temp_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
    remove_network(links, namespaces)

    def gone() -> bool:
        alive = [pid for namespace in namespaces for pid in namespace_pids(namespace)]
        return not alive and not ray_pids(temp_dir)

    # A SIGKILLed daemon vanishes once its parent (init, after `ray start` exited) reaps it.
    left = not wait_for_or_false(gone, 30, interval=0.1)
    shutil.rmtree(temp_dir, ignore_errors=True)
    if left:
        raise RuntimeError(f"Ray processes outlived the cluster: {ray_pids(temp_dir)}")


@contextlib.contextmanager
def ray_cluster(
    workers: int = 2, cpus_per_node: int = 2, resources: dict[str, float] | None = None
) -> Iterator[RayCluster]:
    """A running Ray cluster: ``ray-head`` and ``ray-w1``.. ``ray-w<workers>``, each in its own
    namespace with ``cpus_per_node`` CPUs and the custom ``resources``, all alive on entry.

    Skips (fails under ``CI=true``) without root, ``ip``, ``unshare`` or Ray; fails the test
    (with the nodes' logs) when the nodes are not all alive after ``START_TIMEOUT`` seconds.
    Everything it made is gone on exit; RuntimeError if a process survives."""
    require_netns(master=False)
    require(importlib.util.find_spec("ray") is not None, "Ray is needed (the ray extra)")
    names = ["ray-head", *(f"ray-w{i}" for i in range(1, workers + 1))]
    temp_dir = Path(tempfile.mkdtemp(prefix="hwray-", dir="/tmp"))
    hosts: dict[str, Host] = {}
    links: list[str] = []
    namespaces: list[str] = []
    procs: list[subprocess.Popen] = []
    try:
        subnet, _, master_ip = build_network(temp_dir, names, hosts, links, namespaces)
        nodes = [RayNode(name, hosts[name].address, hosts[name].namespace) for name in names]
        cluster = RayCluster(
            head=nodes[0],
            workers=nodes[1:],
            gcs_address=f"{nodes[0].ip}:{GCS_PORT}",
            dashboard_url=f"http://{nodes[0].ip}:{DASHBOARD_PORT}",
            master_ip=master_ip,
            temp_dir=temp_dir,
            hostnames={name: hostname(subnet, name) for name in names},
            procs=procs,
        )
        head = _start_node(cluster, cluster.head, cpus_per_node, resources)
        if head.wait(timeout=START_TIMEOUT) != 0:
            pytest.fail(f"ray start --head failed:\n{cluster.logs()}")
        starts = [_start_node(cluster, n, cpus_per_node, resources) for n in cluster.workers]
        for start in starts:
            start.wait(timeout=START_TIMEOUT)
        want = sorted(node.ip for node in cluster.nodes)
        if not wait_for_or_false(lambda: cluster.alive_nodes() == want, START_TIMEOUT):
            pytest.fail(
                f"Ray nodes alive: {cluster.alive_nodes()}, wanted {want}\n{cluster.logs()}"
            )
        yield cluster
    finally:
        _stop(temp_dir, procs, links, namespaces)
