"""Headway's gunicorn worker (config/gunicorn_worker.py) under the shipped config/gunicorn.py:
a kept-alive connection's next request is served by the thread that answered the previous one,
and a quiet connection hands its thread back (another connection is served meanwhile, and the
quiet one is still answered later from the poller)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import REPO, free_port, wait_for

REQUEST = b"GET /thread HTTP/1.1\r\nHost: test\r\n\r\n"


@contextlib.contextmanager
def gunicorn(tmp_path: Path, threads: int) -> Iterator[int]:
    """gunicorn with config/gunicorn.py (one worker of ``threads`` threads) serving
    tests/config/_thread_app.py; yields its port."""
    port = free_port()
    env = {**os.environ, "HEADWAY_WEB_WORKERS": "1", "HEADWAY_WEB_THREADS": str(threads)}
    log = tmp_path / "gunicorn.log"
    command = [
        sys.executable, "-m", "gunicorn", "tests.config._thread_app:app",
        "--config", str(REPO / "config" / "gunicorn.py"), "--bind", f"127.0.0.1:{port}",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_for(lambda: _answers(port), 60, "gunicorn to answer")
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        print(log.read_text()[-3000:])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            return bool(_exchange(sock, 1))
    except OSError:
        return False


def _exchange(sock: socket.socket, count: int) -> list[str]:
    """Send ``count`` requests at once (HTTP/1.1 pipelining) and read their ``count`` answers;
    the serving thread's id of each."""
    sock.sendall(REQUEST * count)
    reader = sock.makefile("rb")
    threads = []
    for _ in range(count):
        status = reader.readline()
        assert status.startswith(b"HTTP/1.1 200"), status
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        threads.append(reader.read(length).decode())
    return threads


def test_requests_following_on_a_connection_are_served_by_one_thread(tmp_path):
    with (
        gunicorn(tmp_path, threads=4) as port,
        socket.create_connection(("127.0.0.1", port), timeout=30) as sock,
    ):
        threads = _exchange(sock, 20)
    # Stock gthread hands the connection back to its poller after each answer and on to
    # any of its 4 threads; here the one thread keeps serving what is already waiting.
    assert len(threads) == 20
    assert len(set(threads)) == 1, threads


def test_a_quiet_connection_gives_its_thread_back_and_is_answered_later(tmp_path):
    with (
        gunicorn(tmp_path, threads=1) as port,
        socket.create_connection(("127.0.0.1", port), timeout=30) as quiet,
        socket.create_connection(("127.0.0.1", port), timeout=30) as other,
    ):
        (first,) = _exchange(quiet, 1)
        # The worker's only thread must be free for another connection while this one says
        # nothing (it waits milliseconds at most, then the poller holds the socket).
        (served,) = _exchange(other, 1)
        time.sleep(0.2)
        (again,) = _exchange(quiet, 1)
    assert first == served == again  # one thread in all: it came back each time
