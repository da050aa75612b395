"""Finding: "Through nginx, one client's 200 slow uploads got every other request from its
address refused with 429; on a real network that can be a host's heartbeats", and "a slowloris
from a trial: 1,200 sockets, 0 of 3 requests answered" (trials reached gunicorn directly).

deploy/nginx.conf runs under Debian's nginx in front of gunicorn with Headway's settings
(``tests.helpers_nginx``'s loopback copy of the file). One address (127.0.0.2,
standing for a worker host whose trial misbehaves) holds 1,200 slowloris sockets trickling
headers and enough slow uploads to exhaust its per-address connection limit (a request of
its to an ordinary route is answered 429). Its host agent's heartbeat, from the same address
with the host's token, is still answered 200, and another address's ordinary request too.
No timing is asserted: every wait is for an event, bounded by a generous deadline.
"""

from __future__ import annotations

import datetime
import http.client
import json
import socket
import threading

import pytest
import requests

from bench._server import Backend
from e2e_tests.deploy.test_load import ProductionServer
from e2e_tests.deploy.test_nginx_proxy import ATTACKER, _open_slow
from tests.helpers import free_port, require, wait_for
from tests.helpers_nginx import nginx_binary, start_nginx, stop_nginx

SLOWLORIS = 1200
MAX_UPLOADS = 600  # the per-address limit is 200; a bound for the loop that reaches it


def _request(port: int, method: str, path: str, token: str | None = None, body=None):
    """(status, JSON body) of one request from ``ATTACKER``'s address through nginx."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(ATTACKER, 0))
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)  # fmt: skip
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def _keep_trickling(sockets: list[socket.socket], stop: threading.Event, piece: bytes) -> None:
    """Send ``piece`` on every socket every second (nginx's read timeouts are 10 s) until
    ``stop``; a socket nginx closed is skipped from then on."""
    while not stop.wait(1.0):
        for sock in list(sockets):
            try:
                sock.send(piece)
            except OSError:
                sockets.remove(sock)


@pytest.mark.slow
@pytest.mark.integration
def test_finding_a_trials_slow_uploads_and_slowloris_do_not_starve_its_hosts_heartbeat(tmp_path):
    require(nginx_binary() is not None, "nginx not installed (apt-get install nginx-light)")
    backend = Backend.sqlite()
    backend.env["SECRET_KEY"] = "nginx-host-test-" + "k" * 40
    backend.prepare("nginx")
    host_token = backend.manage("headway_host_token", "gpu-a", "--create").strip().splitlines()[-1]
    listen_port = free_port()
    proxy = None
    stop = threading.Event()
    headers_slow: list[socket.socket] = []
    uploads: list[socket.socket] = []
    tricklers = [
        threading.Thread(target=_keep_trickling, args=(headers_slow, stop, b"X-a: b\r\n")),
        threading.Thread(target=_keep_trickling, args=(uploads, stop, b" ")),
    ]
    try:
        with ProductionServer(backend) as web:
            proxy = start_nginx(tmp_path, listen_port, web.port)
            healthz = f"http://127.0.0.1:{listen_port}/healthz"

            def healthy() -> bool:
                try:
                    return requests.get(healthz, timeout=5).status_code == 200
                except requests.RequestException:
                    return False

            wait_for(healthy, 30, "nginx in front of gunicorn")
            for _ in range(SLOWLORIS):
                sock = _open_slow(listen_port, body=False)
                if sock is not None:
                    headers_slow.append(sock)
            assert len(headers_slow) >= SLOWLORIS * 0.95, len(headers_slow)
            for thread in tricklers:
                thread.start()
            # Slow uploads from the same address until its own ordinary requests are refused.
            refused = False
            while not refused and len(uploads) < MAX_UPLOADS:
                for _ in range(50):
                    sock = _open_slow(listen_port, body=True)
                    if sock is not None:
                        uploads.append(sock)
                refused = _request(listen_port, "GET", "/healthz")[0] == 429
            assert refused, f"{len(uploads)} slow uploads never exhausted the per-address limit"

            status, body = _request(
                listen_port,
                "POST",
                "/api/v1/host-agent/heartbeat/",
                token=host_token,
                body={
                    "pool": "default",
                    "devices": ["0"],
                    "gpu": False,
                    "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
                },
            )
            assert status == 200, body
            assert json.loads(body)["name"] == "gpu-a"
            # Another address is answered too, slowloris and uploads notwithstanding.
            assert requests.get(healthz, timeout=30).status_code == 200
            # And the address itself is still refused (the uploads still hold it).
            assert _request(listen_port, "GET", "/healthz")[0] == 429
    finally:
        stop.set()
        for thread in tricklers:
            if thread.is_alive():
                thread.join()
        for sock in headers_slow + uploads:
            sock.close()
        stop_nginx(proxy)
        backend.cleanup()
