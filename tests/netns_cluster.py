"""Real hosts on one machine: network namespaces joined by a bridge (the multi-host harness).

``NetnsCluster`` builds a master and worker hosts that reach each other only over a network:

- a Linux bridge ``hwb<N>`` holding the master's address ``10.213.<N>.1/24`` (``N`` picked so
  that no interface of the machine already uses ``10.213.<N>.0/24``), in the root namespace;
- per worker host a namespace ``hw<N>-<host>`` with a veth pair (``hw<N>v<i>`` on the bridge,
  ``eth0`` inside at ``10.213.<N>.<10+i>``) and its own loopback. Inside, the host name is
  the host's (``unshare --uts``) and ``/etc/hosts`` (``/etc/netns/<ns>/hosts``, which
  ``ip netns exec`` mounts) resolves it to ``127.0.1.1``, as Debian and Ubuntu do: the
  default that made gloo advertise loopback to the other hosts;
- the master side, all bound to the bridge address: its own PostgreSQL (``initdb`` and
  ``pg_ctl`` from ``/usr/lib/postgresql/*/bin``, run as ``postgres`` in a temporary folder),
  its own Redis (``redis-server --bind``), a moto S3 server, the web server (gunicorn,
  ``registry.management.services.web_command``) and the master worker
  (``registry.management.services.master_worker_command``: the lost-run reaper with beat), with
  migrations applied and an admin user's token;
- per worker host the REST-only host agent ``python -m workers`` inside ``ip netns exec <ns>``
  with its own ``HEADWAY_HOST_NAME``, ``HEADWAY_SLOTS`` CPU slots and work folder, a host token
  issued on the master (``manage.py headway_host_token <host> --create``), the broker, and no
  ``HEADWAY_HOST_ADDRESS`` (the agent derives it from its route to the master). Its environment
  holds no ``SECRET_KEY`` and a ``DATABASE_URL`` naming an unreachable address
  (``UNREACHABLE_DATABASE_URL``): a host that opened the database would fail.

Only what it creates is touched, and ``stop()`` removes all of it (also after a failed start).
Needs root, ``ip``, ``unshare``, ``redis-server`` and PostgreSQL's binaries: ``require_netns()``
skips the test without them, and fails it under ``CI=true``.

API (for tests of several hosts, partitions, host loss)::

    with NetnsCluster(tmp_path, hosts=("a", "b"), slots=2) as cluster:
        cluster.url, cluster.token, cluster.api        # master URL, admin token, ClusterAPI
        cluster.s3_storage(bucket)                     # a checkpoint_storage on its moto S3
        cluster.hosts["a"].address                     # "10.213.N.10"
        cluster.wait_hosts_alive()                     # every worker host heartbeats
        cluster.link_down("b"); cluster.link_up("b")   # cut / restore host b's network
        cluster.kill_worker("b", signal.SIGKILL)       # its worker's whole process group
        cluster.start_worker("b")                      # start it again (after a kill)
        cluster.revoke_token("b")                      # manage.py headway_host_token b --revoke
        cluster.hosts["b"].token                       # its live key ("" once revoked)
        cluster.pids("b")                              # every process in b's namespace
        cluster.agent_environ("b")                     # its agent's environment
        cluster.slots_in_use("b")                      # the master's count (REST workers/)
        cluster.run_in("b", ["ip", "addr"])            # a command inside b's namespace
        cluster.psql("SELECT 1")                       # a query on the master's database
        cluster.stop_web(); cluster.start_web()        # the master's faults (tests/netns_faults.py)
        cluster.stop_master_worker(); cluster.start_master_worker()
        cluster.restart_postgres(down=20)

``worker_env`` (for all) and ``host_env`` (per host) add or override the agents' variables
(``host_env()`` builds them; ``common_env()`` is the master's); ``private_dirs``
gives a host a mount namespace with an empty tmpfs over each listed folder (a file system
that is not shared with the master or the other hosts).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from tests.helpers import REPO, free_port, wait_for
from tests.netns_faults import MasterFaults
from tests.netns_inspect import HostProcesses
from tests.netns_master import (
    PG_BIN,
    S3_KEYS_ENV,
    Postgres,
    connects,
    redis_command,
    run_checked,
)
from tests.netns_network import (
    SECOND_OCTET,
    Host,
    build_network,
    hostname,
    kill_namespace,
    namespace_command,
    remove_network,
)
from tests.netns_storage import ClusterStorage

# The worker hosts' DATABASE_URL: no route leads there from a host's namespace (its only route
# is the bridge's /24), so a host that tried to open the database would fail at once.
UNREACHABLE_DATABASE_URL = "postgres://headway@10.255.255.1:5432/unreachable"
NAMESPACE = "headway"  # HEADWAY_QUEUE of the master and its hosts (the default, unset)


def require_netns(master: bool = True) -> None:
    """Skip (fail under ``CI=true``) unless this process can build namespaced hosts; with
    ``master``, also the master side's Redis and PostgreSQL (False: namespaces only, as for
    ``tests.helpers_ray``)."""
    checks = [
        ("root", os.geteuid() == 0),
        ("ip", shutil.which("ip") is not None),
        ("unshare", shutil.which("unshare") is not None),
    ]
    if master:
        checks += [
            ("redis-server", shutil.which("redis-server") is not None),
            ("PostgreSQL binaries", bool(PG_BIN)),
        ]
    missing = [what for what, ok in checks if not ok]
    if missing:
        why = f"namespaced hosts need {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


class NetnsCluster(HostProcesses, ClusterStorage, MasterFaults):
    """A master and worker hosts in network namespaces (see the module docstring).

    Args:
        base: a folder of its own (PostgreSQL's data, logs, work folders).
        hosts: worker host names (letters, digits, ``-``), each gets a namespace.
        slots: CPU slots per worker host (``HEADWAY_SLOTS``).
        worker_env: variables for every host agent.
        host_env: ``{host: {...}}``: variables for that host's agent only.
        master_env: variables for the master (e.g. ``HEADWAY_LEASE_SECONDS``: the hosts
            adopt the master's timing from its heartbeat answers).
        agents: start a host agent in each host's namespace (False: the namespaces only, for
            other daemons, e.g. ``tests.netns_slurm``'s slurmd).
        web_servers: 1 (``url`` is its own), or 2 behind deploy/nginx.conf (``url`` is
            nginx's; needs nginx).
        private_dirs: ``{host: [folders]}`` hidden behind an empty tmpfs on that host.
        shared_fs: more ``shared_fs`` storage locations, ``{name: folder}`` (the location
            ``shared`` is ``base/shared``).
    """

    def __init__(
        self,
        base: Path,
        hosts: Iterable[str] = ("a", "b"),
        slots: int = 2,
        worker_env: Mapping[str, str] | None = None,
        host_env: Mapping[str, Mapping[str, str]] | None = None,
        private_dirs: Mapping[str, Sequence[str]] | None = None,
        shared_fs: Mapping[str, str] | None = None,
        master_env: Mapping[str, str] | None = None,
        agents: bool = True,
        web_servers: int = 1,
    ) -> None:
        self.base = Path(base)
        self.names = list(hosts)
        self.slots = slots
        self.worker_env = dict(worker_env or {})
        self.host_env_overrides = {k: dict(v) for k, v in (host_env or {}).items()}
        self.master_env = dict(master_env or {})
        self.agents = agents
        self.private_dirs = {k: list(v) for k, v in (private_dirs or {}).items()}
        self.shared_fs = {"shared": str(self.base / "shared"), **(shared_fs or {})}
        self.hosts: dict[str, Host] = {}
        self.subnet = 0
        self.bridge = ""
        self.master = ""
        self.url = ""
        self.web_servers = web_servers
        self.web_ports: list[int] = []
        self.token = ""
        self.database_url = ""
        self.redis_url = ""
        self.s3_url = ""
        self._postgres_server: Postgres | None = None
        self._procs: list[subprocess.Popen] = []
        self._moto = None
        self._made_links: list[str] = []
        self._made_namespaces: list[str] = []
        self._secret = secrets.token_urlsafe(32)

    # -- building -----------------------------------------------------------------------------

    def __enter__(self) -> NetnsCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Build the network, start the master side and every worker (``stop()`` on failure)."""
        require_netns()
        try:
            self._network()
            self._postgres()
            self._redis()
            self._s3()
            self._web()
            self._master_worker()
            for name in self.names if self.agents else ():
                self.start_worker(name)
        except BaseException:
            self.stop()
            raise

    def _network(self) -> None:
        self.subnet, self.bridge, self.master = build_network(
            self.base, self.names, self.hosts, self._made_links, self._made_namespaces
        )

    def _hostname(self, name: str) -> str:
        return hostname(self.subnet, name)

    def _postgres(self) -> None:
        network = f"10.{SECOND_OCTET}.{self.subnet}.0/24"
        self._postgres_server = Postgres(self.master, network)
        self.database_url = self._postgres_server.start()

    def _redis(self) -> None:
        port = free_port()
        self._spawn(redis_command(self.master, port, self.base), self.base / "redis.log")
        self.redis_url = f"redis://{self.master}:{port}/0"
        wait_for(lambda: connects(self.master, port), 30, "redis to listen")

    def _s3(self) -> None:
        from moto.server import ThreadedMotoServer

        self._moto = ThreadedMotoServer(ip_address=self.master, port=0, verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.s3_url = f"http://{host}:{port}"

    @staticmethod
    def _base_env() -> dict[str, str]:
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "VIRTUAL_ENV", "TMPDIR", "PYTHONPATH")
        return {k: v for k, v in os.environ.items() if k in keep}

    def common_env(self) -> dict[str, str]:
        """The master's environment (web server, master worker, ``manage.py``): its database,
        broker, storage, secret key and fast timings."""
        env = self._base_env()
        env.update(
            DATABASE_URL=self.database_url,
            REDIS_URL=self.redis_url,
            HEADWAY_MASTER_URL=self.url or f"http://{self.master}",
            HEADWAY_STORAGE_ENDPOINTS=self.s3_url,
            HEADWAY_STORAGE_LOCATIONS=self.storage_locations(),
            HEADWAY_CHECKPOINT_DIR=self.shared_fs["shared"],
            HEADWAY_LOG_FLUSH_SECONDS="0.2",
            HEADWAY_KILL_GRACE_SECONDS="3",
            HEADWAY_HOST_HEARTBEAT_SECONDS="1",
            ALLOWED_HOSTS=f"{self.master},127.0.0.1,localhost",
            SECRET_KEY=self._secret,
            HEADWAY_VAR_DIR=str(self.base / "master"),
            **S3_KEYS_ENV,
        )
        env.update(self.master_env)
        return env

    def host_env(self, name: str) -> dict[str, str]:
        """Host ``name``'s agent environment: the master's URL, its host token, the broker, its
        slots and folders, the storage keys and the timings used before the master's first
        heartbeat answer; no ``SECRET_KEY`` and an unreachable ``DATABASE_URL``; then
        ``worker_env`` and ``host_env[name]``."""
        host = self.hosts[name]
        env = self._base_env()
        env.update(
            HEADWAY_MASTER=self.url,
            HEADWAY_HOST_TOKEN=host.token,
            REDIS_URL=self.redis_url,
            HEADWAY_HOST_NAME=name,
            HEADWAY_SLOTS=str(self.slots),
            HEADWAY_VAR_DIR=str(host.base / "var"),
            HEADWAY_WORK_DIR=str(host.base / "work"),
            HEADWAY_CHECKPOINT_DIR=self.shared_fs["shared"],
            HEADWAY_LOG_FLUSH_SECONDS="0.2",
            HEADWAY_KILL_GRACE_SECONDS="3",
            HEADWAY_HOST_HEARTBEAT_SECONDS="1",
            DATABASE_URL=UNREACHABLE_DATABASE_URL,
            **S3_KEYS_ENV,
        )
        env.update(self.worker_env)
        env.update(self.host_env_overrides.get(name, {}))
        return env

    def manage(self, *args: str) -> str:
        """Run ``manage.py *args`` on the master (its environment); its stdout."""
        cmd = [sys.executable, "manage.py", *args]
        return run_checked(cmd, cwd=REPO, env=self.common_env()).stdout

    def _web(self) -> None:
        env = self.common_env()
        run_checked([sys.executable, "manage.py", "migrate", "--noinput"], cwd=REPO, env=env)
        self.token = run_checked(
            [sys.executable, "manage.py", "headway_token", "admin", "--create", "--superuser"],
            cwd=REPO,
            env=env,
        ).stdout.strip()
        self.start_web_tier(self.web_servers)

    def _master_worker(self) -> None:
        """The master's Celery worker with beat (lost-run reaper, GC), in the root namespace."""
        self.start_master_worker()

    def _spawn(
        self, cmd: Sequence[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                list(cmd),
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs.append(proc)
        return proc

    # -- worker hosts -------------------------------------------------------------------------

    def issue_token(self, name: str) -> str:
        """Issue host ``name``'s token on the master (``manage.py headway_host_token NAME
        --create``, which prints only the key); keep and return its key."""
        key = self.manage("headway_host_token", name, "--create").strip()
        if not key.startswith("hwh_"):
            raise RuntimeError(f"headway_host_token {name} --create printed {key!r}, not a key")
        self.hosts[name].token = key
        return key

    def revoke_token(self, name: str) -> None:
        """Revoke host ``name``'s live token on the master (``manage.py headway_host_token NAME
        --revoke``); its running agent keeps the old key, the next ``start_worker`` gets a new
        one."""
        self.manage("headway_host_token", name, "--revoke")
        self.hosts[name].token = ""

    def start_worker(self, name: str) -> subprocess.Popen:
        """Start (again) host ``name``'s agent (``python -m workers``) inside its namespace,
        with its live token (one is issued first when it has none)."""
        host = self.hosts[name]
        if not host.token:
            self.issue_token(name)
        env = self.host_env(name)
        host.env = env
        cmd = self.host_command(name, [sys.executable, "-m", "workers"])
        host.worker = self._spawn(cmd, host.log, env=env)
        return host.worker

    def host_command(self, name: str, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on host ``name``: inside its namespace, under its own host name (a
        UTS namespace) and, if asked, with its private folders (``private_dirs``)."""
        mounts = self.private_dirs.get(name, [])
        return namespace_command(self.hosts[name].namespace, self._hostname(name), argv, mounts)

    def spawn(
        self, cmd: Sequence[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """Start ``cmd`` in its own session, output to ``log``; ``stop()`` ends it."""
        return self._spawn(cmd, log, env=env)

    def wait_hosts_alive(self, timeout: float = 180) -> None:
        """Wait until the master lists every worker host as alive."""

        def alive() -> bool:
            rows = self.api.get("workers/").get("results", [])
            return {r["name"] for r in rows if r.get("alive")} >= set(self.names)

        wait_for(alive, timeout, f"every host to register (logs under {self.base})")

    def kill_worker(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to host ``name``'s worker process group (its celery and trials)."""
        worker = self.hosts[name].worker
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, sig)

    def link_down(self, name: str) -> None:
        """Cut host ``name`` off the network (its bridge-side veth goes down)."""
        run_checked(["ip", "link", "set", self.hosts[name].veth, "down"])

    def link_up(self, name: str) -> None:
        """Reconnect host ``name``."""
        run_checked(["ip", "link", "set", self.hosts[name].veth, "up"])

    def slots_in_use(self, name: str) -> int:
        """Slots the master counts in use on host ``name`` (REST ``workers/{name}/``)."""
        return int(self.api.get(f"workers/{name}/")["slots_in_use"])

    def psql(self, sql: str) -> str:
        """Run ``sql`` on the master's database; its unaligned output."""
        return run_checked(["psql", self.database_url, "-At", "-c", sql]).stdout

    @property
    def api(self):
        """The admin's ``ClusterAPI`` on the master (``tests.plugin``)."""
        from tests.helpers_cluster import ClusterAPI

        return ClusterAPI(self.url, self.token)

    # -- teardown -----------------------------------------------------------------------------

    @staticmethod
    def _terminate(procs: Sequence[subprocess.Popen], grace: float = 20) -> None:
        """SIGTERM each process group, SIGKILL those still running ``grace`` seconds later."""
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def stop(self) -> None:
        """Stop every process it started and remove its namespaces, links and database."""
        # The host agents first, while the master answers (they mark their hosts stopped).
        agents = [h.worker for h in self.hosts.values() if h.worker is not None]
        self._terminate(agents)
        self._terminate([proc for proc in reversed(self._procs) if proc not in agents])
        for namespace in self._made_namespaces:  # trials that left their group
            kill_namespace(namespace)
        if self._moto is not None:
            self._moto.stop()
            self._moto = None
        if self._postgres_server is not None:
            self._postgres_server.stop()
        remove_network(self._made_links, self._made_namespaces)
        self._made_links, self._made_namespaces, self._procs = [], [], []


def in_subnet(address: str, cluster: NetnsCluster) -> bool:
    """Whether ``address`` is one of the cluster's (``10.213.<N>.0/24``)."""
    network = ipaddress.ip_network(f"10.{SECOND_OCTET}.{cluster.subnet}.0/24")
    return ipaddress.ip_address(address) in network
