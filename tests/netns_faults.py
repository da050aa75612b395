"""Faults of the master side of a namespaced test cluster (tests/netns_cluster.py): its web
servers (one, or two behind nginx), master worker, Redis and PostgreSQL stopped and started
again, as an operator's restart or a crash would.

A mixin of ``NetnsCluster``: it needs ``base``, ``master``, ``url``, ``web_ports``,
``redis_url``, ``_procs``, ``_spawn``, ``_terminate``, ``common_env`` and ``_postgres_server``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from tests.helpers import free_port, require, serves_headway, wait_for


class MasterFaults:
    """Stopping and starting the master's processes (see module)."""

    base: Path
    master: str
    url: str
    web_ports: list[int]
    redis_url: str
    _procs: list[subprocess.Popen]
    _spawn: Callable[..., subprocess.Popen]
    _terminate: Callable[..., None]
    common_env: Callable[[], dict[str, str]]
    _postgres_server: object

    def start_web_tier(self, web_servers: int) -> None:
        """Choose the web tier's ports and ``url`` and start it: one web server (``url`` is its
        own), or two behind nginx (docker-compose.yml's web1, web2 and proxy: hosts know only
        nginx's ``url``)."""
        assert web_servers in (1, 2), "one web server, or two behind nginx"
        self.web_ports = [free_port() for _ in range(web_servers)]
        listen_port = self.web_ports[0] if web_servers == 1 else free_port()
        self.url = f"http://{self.master}:{listen_port}"
        self.start_web()
        if web_servers == 2:
            self.start_proxy(listen_port)
            wait_for(lambda: serves_headway(self.url), 60, "nginx in front of both web servers")

    def start_web(self, ports: Sequence[int] | None = None) -> list[subprocess.Popen]:
        """Start the master's web servers (gunicorn, one worker of 64 threads each) on
        ``ports`` (default ``web_ports``: one, ``self.url``'s own port, or two behind nginx at
        ``self.url``), as at the cluster's start; return them once each serves."""
        from registry.management.services import web_command

        env = self.common_env()
        env.update(HEADWAY_MASTER_URL=self.url, HEADWAY_WEB_WORKERS="1", HEADWAY_WEB_THREADS="64")
        procs = [
            self._spawn(web_command(port, bind=self.master), self.base / f"web-{port}.log", env=env)
            for port in ports or self.web_ports
        ]
        for port in ports or self.web_ports:
            url = f"http://{self.master}:{port}"
            wait_for(lambda url=url: serves_headway(url), 120, f"the web server {url}")
        if any(proc.poll() is None and "nginx" in proc.args[0] for proc in self._procs):
            # nginx leaves a server that failed out for its fail_timeout (10 s): until it
            # tries it again, it answers 503 + Retry-After, as clients expect of a restart.
            wait_for(lambda: serves_headway(self.url), 60, "nginx to use the web servers again")
        return procs

    def start_proxy(self, listen_port: int) -> subprocess.Popen:
        """deploy/nginx.conf (Debian's nginx) on the master's address and ``listen_port`` in
        front of its two web servers (``web_ports``), as docker-compose.yml's ``proxy``."""
        from tests.helpers_nginx import CONF, nginx_binary, nginx_conf

        nginx = nginx_binary()
        require(nginx is not None, "nginx not installed (apt-get install nginx-light)")
        assert nginx is not None and len(self.web_ports) == 2, self.web_ports
        run_dir = self.base / "nginx"
        run_dir.mkdir(exist_ok=True)
        conf = run_dir / "nginx.conf"
        text = CONF.read_text()
        conf.write_text(
            nginx_conf(
                text,
                listen_port=listen_port,
                upstream_ports=(self.web_ports[0], self.web_ports[1]),
                run_dir=run_dir,
                address=self.master,
            )
        )
        cmd = [nginx, "-p", str(run_dir), "-e", "stderr", "-c", str(conf), "-g", "daemon off;"]
        return self._spawn(cmd, self.base / "nginx.log")

    def kill_web(self, port: int) -> None:
        """SIGKILL the web server on ``port`` (one of ``web_ports``), as a crash would; it
        stays down."""
        bind = f"{self.master}:{port}"
        procs = [proc for proc in self._find("gunicorn") if bind in proc.args]
        assert len(procs) == 1, f"one web server on {bind}: {procs}"
        os.killpg(procs[0].pid, signal.SIGKILL)
        procs[0].wait()
        self._procs.remove(procs[0])

    def stop_web(self) -> None:
        """Stop every web server of the master (SIGTERM to its process group, SIGKILL a minute
        later) and wait for it; nginx, when there is one, stays up."""
        self._stop(self._find("gunicorn"))

    def start_master_worker(self) -> subprocess.Popen:
        """Start the master's Celery worker with beat (lost-run reaper, GC)."""
        from registry.management.services import master_worker_command
        from tests.netns_cluster import NAMESPACE

        log = self.base / "master-worker.log"
        return self._spawn(master_worker_command(NAMESPACE), log, env=self.common_env())

    def stop_master_worker(self) -> None:
        """Stop the master's worker (SIGTERM to its process group, SIGKILL a minute later) and
        wait for it."""
        self._stop(self._find("config", "worker"))

    def restart_redis(self, down: float) -> None:
        """Stop the master's Redis (the broker: every queued message is lost, it keeps no
        data), keep it down ``down`` seconds, start it again on the same address and port."""
        from tests.netns_master import connects, redis_command

        port = urlsplit(self.redis_url).port
        assert port is not None, self.redis_url
        self._stop(self._find("redis-server"))
        time.sleep(down)
        self._spawn(redis_command(self.master, port, self.base), self.base / "redis.log")
        wait_for(lambda: connects(self.master, port), 30, "redis to listen again")

    def restart_postgres(self, down: float) -> None:
        """Stop the master's PostgreSQL (fast shutdown: connections cut, as a restart does),
        keep it down ``down`` seconds, start it again with the same options."""
        server = self._postgres_server
        restart = getattr(server, "restart", None)
        assert restart is not None, "the cluster has no PostgreSQL of its own"
        restart(down)

    def _find(self, *words: str) -> list[subprocess.Popen]:
        found = [
            proc
            for proc in self._procs
            if proc.poll() is None and all(word in proc.args for word in words)
        ]
        assert found, f"no running process with {words} in its command"
        return found

    def _stop(self, procs: Sequence[subprocess.Popen]) -> None:
        self._terminate(procs, grace=60)
        for proc in procs:
            self._procs.remove(proc)
