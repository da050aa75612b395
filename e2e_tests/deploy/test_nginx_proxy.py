"""Second audit finding (Medium): "slowloris: 600 slowly trickled connections from one client made
``/healthz`` time out in 4 of 5 samples; gunicorn is published directly, with no buffering
proxy".

``deploy/nginx.conf`` (what docker-compose.yml's ``proxy`` service runs) is started with
Debian's nginx in front of gunicorn with Headway's settings, its ``listen`` / ``upstream`` /
``pid`` lines pointed at loopback ports and a temp folder. One client (127.0.0.2) opens 600
connections: half trickle request headers, half announce a body and trickle it. Meanwhile
``/healthz`` is asked through nginx from another address (127.0.0.1) every second: every
sample answers. Loopback only; every loop is bounded by a deadline.

nginx is installed by .ci/run (``apt-get install nginx-light``); without it the test skips
locally and fails under CI=true.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time

import pytest
import requests

from bench._server import Backend
from e2e_tests.deploy.test_load import ProductionServer
from tests.helpers import free_port, require, wait_for
from tests.helpers_nginx import CONF, nginx_binary, start_nginx, stop_nginx

SLOW_CONNECTIONS = 600
ATTACKER = "127.0.0.2"  # the whole of 127.0.0.0/8 is loopback on Linux
ATTACK_SECONDS = 25.0  # longer than client_header_timeout / client_body_timeout (10 s)
TRICKLE_EVERY = 2.0


def _directive(text: str, name: str) -> str:
    values = re.findall(rf"^\s*{name}\s+([^;]+);", text, flags=re.M)
    assert len(values) == 1, f"deploy/nginx.conf: expected one {name!r}, found {values}"
    return values[0]


def _size_bytes(value: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    value = value.strip().lower()
    return int(value[:-1]) * units[value[-1]] if value[-1] in units else int(value)


@pytest.mark.integration
def test_nginx_answers_json_when_gunicorn_is_down_or_the_body_too_large(tmp_path):
    """What nginx answers by itself is JSON in the API's error shape: 503 + Retry-After while
    gunicorn is down or restarting (the SDK retries it), 413 past the body limit."""
    listen_port = free_port()
    # Nothing on either web server's port.
    proxy = start_nginx(tmp_path, listen_port, free_port(), free_port())
    try:
        url = f"http://127.0.0.1:{listen_port}"

        def answering() -> list[requests.Response]:
            # In a list: a Response is falsy when its status is an error.
            try:
                return [requests.get(f"{url}/api/v1/experiments/", timeout=5)]
            except requests.RequestException:
                return []

        (down,) = wait_for(answering, 30, "nginx to listen")
        assert down.status_code == 503
        assert down.headers["Retry-After"] == "5"
        assert down.json()["detail"].startswith("The server is restarting")
        # A 64 MiB body announced (nginx answers from the header, before any body is sent).
        with socket.create_connection(("127.0.0.1", listen_port), timeout=10) as sock:
            sock.sendall(
                b"POST /api/v1/experiments/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"Content-Type: application/json\r\nContent-Length: 67108864\r\n\r\n"
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413"), head
        assert json.loads(body) == {"detail": "Request body too large.", "errors": {}}
    finally:
        stop_nginx(proxy)


def test_nginx_body_limit_matches_the_apps():
    """nginx lets through every body the app accepts (the app answers its own JSON 413 past
    DATA_UPLOAD_MAX_MEMORY_SIZE) and refuses little more."""
    from django.conf import settings

    limit = _size_bytes(_directive(CONF.read_text(), "client_max_body_size"))
    app = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert app <= limit < app + 2 * 1024**2, (limit, app)
    for name in ("client_header_timeout", "client_body_timeout", "keepalive_timeout"):
        assert _directive(CONF.read_text(), name)
    assert _directive(CONF.read_text(), "proxy_buffering") == "on"
    assert _directive(CONF.read_text(), "proxy_request_buffering") == "on"


def _open_slow(port: int, body: bool) -> socket.socket | None:
    sock = socket.socket()
    sock.settimeout(5)
    try:
        sock.bind((ATTACKER, 0))
        sock.connect(("127.0.0.1", port))
        if body:
            sock.sendall(
                b"POST /api/v1/auth/login/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\nContent-Length: 100000\r\n\r\n{"
            )
        else:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    except OSError:
        sock.close()
        return None
    sock.setblocking(False)
    return sock


def _trickle(sockets: list[socket.socket], body: bool) -> list[socket.socket]:
    """Send one more byte-sized piece on each; return the sockets nginx has not closed."""
    alive = []
    for sock in sockets:
        try:
            sock.send(b" " if body else b"X-a: b\r\n")
            alive.append(sock)
        except OSError:
            sock.close()
    return alive


@pytest.mark.slow
@pytest.mark.integration
def test_finding_slowloris_600_slow_connections_do_not_stop_healthz_through_nginx(tmp_path):
    require(nginx_binary() is not None, "nginx not installed (apt-get install nginx-light)")
    backend = Backend.sqlite()
    backend.env["SECRET_KEY"] = "nginx-test-" + "k" * 40
    backend.prepare("nginx")
    listen_port = free_port()
    proxy: subprocess.Popen | None = None
    slow: dict[bool, list[socket.socket]] = {False: [], True: []}
    try:
        with ProductionServer(backend) as web:
            proxy = start_nginx(tmp_path, listen_port, web.port)
            url = f"http://127.0.0.1:{listen_port}/healthz"

            def healthy() -> bool:
                try:
                    return requests.get(url, timeout=5).status_code == 200
                except requests.RequestException:
                    return False

            wait_for(healthy, 30, "nginx in front of gunicorn")
            for i in range(SLOW_CONNECTIONS):
                sock = _open_slow(listen_port, body=bool(i % 2))
                if sock is not None:
                    slow[bool(i % 2)].append(sock)
            opened = sum(len(s) for s in slow.values())
            assert opened >= SLOW_CONNECTIONS * 0.95, f"only {opened} slow connections opened"
            samples: list[str] = []
            deadline = time.monotonic() + ATTACK_SECONDS
            next_trickle = time.monotonic() + TRICKLE_EVERY
            while time.monotonic() < deadline:
                if time.monotonic() >= next_trickle:
                    for body in (False, True):
                        slow[body] = _trickle(slow[body], body)
                    next_trickle += TRICKLE_EVERY
                try:
                    answer = requests.get(url, timeout=5)
                    samples.append(str(answer.status_code))
                except requests.RequestException as exc:
                    samples.append(type(exc).__name__)
                time.sleep(1.0)
            print(f"samples: {samples}; slow connections still open: "
                  f"{len(slow[False])} header, {len(slow[True])} body")  # fmt: skip
            assert len(samples) >= 10
            assert set(samples) == {"200"}, samples
            # The trickled connections were cut by nginx's read timeouts, not kept forever.
            assert len(slow[False]) < SLOW_CONNECTIONS // 2
    finally:
        for sockets in slow.values():
            for sock in sockets:
                sock.close()
        stop_nginx(proxy)
        backend.cleanup()
