"""The SDK's ``Session`` and the environment: the token always wins over ``~/.netrc``, proxy
variables are honoured, and without them the environment is read once, not per call.

Real HTTP servers on loopback: one answers with the request line and ``Authorization`` header
it saw, the other plays an HTTP proxy (a proxied request names the absolute URL).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from headway.client import APIError, Session
from tests.helpers import answer_json

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class _Echo(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the path of its request line and its Authorization header."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # http.server's naming
        answer_json(self, {"path": self.path, "authorization": self.headers.get("Authorization")})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_the_token_is_sent_even_when_netrc_names_the_registry(
    echo_url: str, no_proxies: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    # The trap this guards against: requests replaces a session's Authorization header with
    # the netrc entry's Basic credentials.
    plain = requests.Session()
    plain.headers["Authorization"] = "Token tok"
    assert plain.get(f"{echo_url}/api/v1/x/").json()["authorization"].startswith("Basic ")

    seen = Session(echo_url, "tok").get("x/")
    assert seen == {"path": "/api/v1/x/", "authorization": "Token tok"}


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_proxy_variable_routes_calls_through_the_proxy(
    echo_url: str, no_proxies: None, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # The proxy (an echo server) sees the absolute URL of a registry that is never contacted.
    monkeypatch.setenv(variable, echo_url)
    seen = Session("http://registry.invalid:8080", "tok").get("trials/1/")
    assert seen == {
        "path": "http://registry.invalid:8080/api/v1/trials/1/",
        "authorization": "Token tok",
    }


def test_no_proxy_exempts_the_registry(
    echo_url: str, no_proxies: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert Session(echo_url, "tok").get("y/")["path"] == "/api/v1/y/"


def test_without_proxies_the_environment_is_read_once(
    echo_url: str, no_proxies: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = Session(echo_url, "tok")
    # Read when the session was made: a proxy set afterwards does not reroute its calls.
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert session.get("z/")["path"] == "/api/v1/z/"
    # A new session reads the environment again.
    with pytest.raises(APIError, match="Unable to connect to proxy"):
        Session(echo_url, "tok", max_retries=0).get("z/")
