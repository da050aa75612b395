"""Second audit finding (Medium): "the database runs out of connections under load and stays
broken": persistent per-thread connections (``HEADWAY_DB_CONN_MAX_AGE=600``) exhausted
PostgreSQL's ``max_connections`` and the server answered 500 ("too many clients").

Here: the settings (a bounded pool on PostgreSQL, refused combinations named), and every
transient database error answered 503 with ``Retry-After`` (API JSON, dashboard pages, login,
middleware) and retried by the SDK. The load itself: e2e_tests/config/test_db_pool_load.py.
"""

from __future__ import annotations

import http.server
import threading
from typing import ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, connection
from django.test import Client, RequestFactory

from config.database import DEFAULT_POOL_MAX_SIZE, database_settings
from headway.client import _session
from headway.client._session import Session, retry_after_seconds
from registry.overload import server_error

PG_URL = "postgres://postgres@127.0.0.1:5432/headway"
POOL_VARIABLES = (
    "HEADWAY_DB_POOL_MAX_SIZE",
    "HEADWAY_DB_POOL_MIN_SIZE",
    "HEADWAY_DB_POOL_TIMEOUT_SECONDS",
    "HEADWAY_DB_CONN_MAX_AGE",
)


@pytest.fixture
def clean_env(monkeypatch):
    for name in POOL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# -- settings --------------------------------------------------------------------------------------


def test_finding_db_connections_postgres_uses_a_bounded_pool_with_health_checks(clean_env):
    database = database_settings(PG_URL)
    assert database["CONN_MAX_AGE"] == 0  # a request's connection goes back to the pool
    assert database["CONN_HEALTH_CHECKS"] is True  # Django passes the pool check_connection
    pool = database["OPTIONS"]["pool"]
    assert pool["max_size"] == DEFAULT_POOL_MAX_SIZE
    # Two gunicorn workers, a Celery worker and its beat stay under max_connections=100.
    assert 4 * DEFAULT_POOL_MAX_SIZE < 100
    assert pool["timeout"] > 0


def test_finding_db_connections_pool_variables_are_applied(clean_env):
    clean_env.setenv("HEADWAY_DB_POOL_MAX_SIZE", "7")
    clean_env.setenv("HEADWAY_DB_POOL_MIN_SIZE", "1")
    clean_env.setenv("HEADWAY_DB_POOL_TIMEOUT_SECONDS", "2.5")
    pool = database_settings(PG_URL)["OPTIONS"]["pool"]
    assert (pool["max_size"], pool["min_size"], pool["timeout"]) == (7, 1, 2.5)


def test_finding_db_connections_pool_off_keeps_persistent_connections(clean_env):
    clean_env.setenv("HEADWAY_DB_POOL_MAX_SIZE", "0")
    clean_env.setenv("HEADWAY_DB_CONN_MAX_AGE", "60")
    database = database_settings(PG_URL)
    assert "pool" not in database.get("OPTIONS", {})
    assert database["CONN_MAX_AGE"] == 60


def test_statements_are_prepared_only_behind_our_own_pool(clean_env):
    """With the pool on nothing sits between us and PostgreSQL, so repeated statements may be
    prepared; with it off an external pooler may, and Django's default (never) stays."""
    assert database_settings(PG_URL)["OPTIONS"]["prepare_threshold"] >= 1
    clean_env.setenv("HEADWAY_DB_POOL_MAX_SIZE", "0")
    assert "prepare_threshold" not in database_settings(PG_URL).get("OPTIONS", {})


@pytest.mark.parametrize(
    ("url", "env", "named"),
    [
        (PG_URL, {"HEADWAY_DB_CONN_MAX_AGE": "600"}, "HEADWAY_DB_CONN_MAX_AGE"),
        (PG_URL, {"HEADWAY_DB_POOL_MAX_SIZE": "-1"}, "HEADWAY_DB_POOL_MAX_SIZE"),
        (PG_URL, {"HEADWAY_DB_POOL_MIN_SIZE": "9", "HEADWAY_DB_POOL_MAX_SIZE": "4"},
         "HEADWAY_DB_POOL_MIN_SIZE"),
        (PG_URL, {"HEADWAY_DB_POOL_TIMEOUT_SECONDS": "0"}, "HEADWAY_DB_POOL_TIMEOUT_SECONDS"),
        (PG_URL, {"HEADWAY_DB_POOL_TIMEOUT_SECONDS": "soon"}, "HEADWAY_DB_POOL_TIMEOUT_SECONDS"),
        ("sqlite:////tmp/x.sqlite3", {"HEADWAY_DB_POOL_MAX_SIZE": "8"},
         "HEADWAY_DB_POOL_MAX_SIZE"),
    ],
)  # fmt: skip
def test_finding_db_connections_bad_pool_settings_are_refused_by_name(clean_env, url, env, named):
    for name, value in env.items():
        clean_env.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=named):
        database_settings(url)


# -- 503 + Retry-After ----------------------------------------------------------------------------


def _too_many_clients(execute, sql, params, many, context):
    # What PostgreSQL answers a connection past max_connections (and the pool's timeout is an
    # OperationalError too): raised where Django runs every query.
    raise OperationalError("FATAL:  sorry, too many clients already")


def test_finding_db_connections_api_answers_503_with_retry_after(api):
    with connection.execute_wrapper(_too_many_clients):
        response = api.get("/api/v1/experiments/")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["detail"].startswith("The database is busy")
    assert response.json()["errors"] == {}


def test_finding_db_connections_dashboard_and_login_answer_503_not_500(client_alice):
    with connection.execute_wrapper(_too_many_clients):
        page = client_alice.get("/")
    assert page.status_code == 503
    assert page["Retry-After"] == "2"
    anonymous = Client()
    with connection.execute_wrapper(_too_many_clients):
        login = anonymous.post("/accounts/login/", {"username": "a", "password": "b"})
    assert login.status_code == 503


def test_finding_db_connections_error_outside_views_answers_503():
    """A database error outside any view (middleware: a session saved after the view) reaches
    ``handler500``, which answers 503 too; other errors stay 500 (JSON under /api/)."""
    factory = RequestFactory()
    try:
        raise OperationalError("server closed the connection unexpectedly")
    except OperationalError:
        api = server_error(factory.get("/api/v1/experiments/"))
        page = server_error(factory.get("/"))
    assert (api.status_code, api["Retry-After"], api["Content-Type"]) == (
        503,
        "2",
        "application/json",
    )
    assert (page.status_code, page["Retry-After"]) == (503, "2")
    try:
        raise ValueError("a bug")
    except ValueError:
        bug = server_error(factory.get("/api/v1/experiments/"))
    assert bug.status_code == 500 and not bug.has_header("Retry-After")


# -- the SDK waits Retry-After and retries ---------------------------------------------------------


class _BusyOnceHandler(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[list[int]] = []

    def do_GET(self):  # http.server's name
        code = self.answers.pop(0) if self.answers else 200
        body = b'{"detail": "busy", "errors": {}}' if code == 503 else b'{"ok": true}'
        self.send_response(code)
        if code == 503:
            self.send_header("Retry-After", "3")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_finding_db_connections_sdk_retries_503_after_retry_after(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BusyOnceHandler)
    _BusyOnceHandler.answers = [503, 503]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    monkeypatch.setattr(_session.time, "sleep", waits.append)
    try:
        session = Session(f"http://127.0.0.1:{server.server_address[1]}", backoff=0.5)
        assert session.get("experiments/") == {"ok": True}
    finally:
        server.shutdown()
        server.server_close()
    # Both waits honour the server's 3 s, above the 0.5 s / 1 s backoff.
    assert waits == [3.0, 3.0]


def test_retry_after_header_forms():
    import requests

    def answer(value):
        response = requests.Response()
        if value is not None:
            response.headers["Retry-After"] = value
        return response

    assert retry_after_seconds(answer("2")) == 2.0
    assert retry_after_seconds(answer("100000")) == _session.RETRY_AFTER_CAP_S
    assert retry_after_seconds(answer("Wed, 21 Oct 2015 07:28:00 GMT")) is None
    assert retry_after_seconds(answer("-1")) is None
    assert retry_after_seconds(answer(None)) is None
    assert retry_after_seconds(None) is None
