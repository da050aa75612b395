"""A private ``redis-server`` for the broker outage tests: they stop and restart it, which the
shared Redis (6379) must never go through."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port


class PrivateRedis:
    """``redis-server`` on 127.0.0.1 at a free port, without persistence: a restart loses every
    message, as a broker restarted without AOF does (context manager; ``stop``/``start``).

    Arguments:
        log_dir (Path): where ``redis-<n>.log`` of each start goes.
    """

    def __init__(self, log_dir: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("needs redis-server")
        self.port = free_port()
        self.log_dir = log_dir
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it accepts connections."""
        self.starts += 1
        with open(self.log_dir / f"redis-{self.starts}.log", "wb") as log:
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--daemonize", "no"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock,
            ):
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 10 s): every client's connection drops."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> PrivateRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def master_broker(url: str) -> Iterator[None]:
    """Point this process's master Celery app (``config.celery``) at the broker ``url``, and
    back afterwards: what ``send_task`` reaches in web-tier code run by a test."""
    from config.celery import app
    from workers.broker import celery_broker_settings

    saved = {
        key: app.conf[key] for key in ("broker_url", "broker_transport", "broker_transport_options")
    }
    options = {
        key: value
        for key, value in saved["broker_transport_options"].items()
        if key != "socket_connect_timeout"  # the default for ``url`` applies
    }
    app.conf.update(broker_url=url, **celery_broker_settings(url, options))
    app._after_fork()  # drop the pooled connections to the old broker
    try:
        yield
    finally:
        app.conf.update(saved)
        app._after_fork()


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A loopback port whose connection attempts are never answered, as those to a broker host
    that is down or cut off: a listener with a full backlog that never accepts (the kernel
    drops further SYNs)."""
    with socket.socket() as listener, socket.socket() as filler:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = int(listener.getsockname()[1])
        filler.connect(("127.0.0.1", port))  # takes the one place in the backlog
        yield port
