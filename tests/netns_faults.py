"""Faults of the master side of a namespaced test cluster (tests/netns_cluster.py): its web
server, master worker, Redis and PostgreSQL stopped and started again, as an operator's restart
or a crash would.

A mixin of ``NetnsCluster``: it needs ``base``, ``master``, ``url``, ``redis_url``, ``_procs``,
``_spawn``, ``_terminate``, ``common_env`` and ``_postgres_server``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from tests.helpers import serves_headway, wait_for


class MasterFaults:
    """Stopping and starting the master's processes (see module)."""

    base: Path
    master: str
    url: str
    redis_url: str
    _procs: list[subprocess.Popen]
    _spawn: Callable[..., subprocess.Popen]
    _terminate: Callable[..., None]
    common_env: Callable[[], dict[str, str]]
    _postgres_server: object

    def start_web(self) -> subprocess.Popen:
        """Start the web server (gunicorn, one worker of 64 threads) on ``self.url``'s port, as
        at the cluster's start; return once it serves."""
        from config.services import web_command

        env = self.common_env()
        env.update(HEADWAY_MASTER_URL=self.url, HEADWAY_WEB_WORKERS="1", HEADWAY_WEB_THREADS="64")
        port = urlsplit(self.url).port
        assert port is not None, self.url
        proc = self._spawn(web_command(port, bind=self.master), self.base / "web.log", env=env)
        wait_for(lambda: serves_headway(self.url), 120, f"the web server ({self.base})")
        return proc

    def stop_web(self) -> None:
        """Stop every web server of the master (SIGTERM to its process group, SIGKILL a minute
        later) and wait for it."""
        self._stop(self._find("gunicorn"))

    def start_master_worker(self) -> subprocess.Popen:
        """Start the master's Celery worker with beat (lost-run reaper, GC)."""
        from config.services import master_worker_command
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
