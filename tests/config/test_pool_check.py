"""The pool's check before it lends a PostgreSQL connection (config.database, config.postgresql).

A healthy idle connection is lent without a statement (its socket is quiet); one whose backend
the server ended (``pg_terminate_backend``, what a restart does to every session) is found,
discarded and replaced before a caller sees it. On a real PostgreSQL, with psycopg_pool's pool
as Django builds it.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from config.database import database_settings
from config.postgresql.base import check_pooled_connection
from tests.helpers import require, wait_for

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _admin() -> psycopg.Connection:
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        require(False, "PostgreSQL at 127.0.0.1:5432")
        raise


@pytest.fixture
def pool():
    admin = _admin()
    pool = ConnectionPool(
        ADMIN_URL,
        min_size=1,
        max_size=1,
        check=check_pooled_connection,
        kwargs={"autocommit": True},
        open=True,
    )
    pool.wait(timeout=10)
    yield pool, admin
    pool.close()
    admin.close()


def _last_query(admin: psycopg.Connection, pid: int) -> str:
    row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    assert row is not None, f"backend {pid} is gone"
    return row[0]


def test_a_healthy_idle_connection_is_lent_without_a_statement(pool) -> None:
    pool, admin = pool
    with pool.connection() as conn:
        pid = conn.info.backend_pid
        conn.execute("SELECT 'marker-before-return'")
    with pool.connection() as conn:
        assert conn.info.backend_pid == pid  # the same connection, lent again
        # psycopg_pool's own check would have run an empty query on it first.
        assert _last_query(admin, pid) == "SELECT 'marker-before-return'"
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)


def test_a_connection_whose_backend_was_terminated_is_replaced_before_it_is_lent(pool) -> None:
    pool, admin = pool
    with pool.connection() as conn:
        pid = conn.info.backend_pid
    assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)
    wait_for(
        lambda: (
            admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone() is None
        ),
        timeout=10,
        what=f"backend {pid} to end",
        interval=0.05,
    )
    with pool.connection() as conn:  # no error: the dead one was found by the check
        assert conn.info.backend_pid != pid
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)


def test_a_closed_connection_fails_the_check() -> None:
    conn = _admin()
    conn.close()
    with pytest.raises(psycopg.OperationalError, match="closed"):
        check_pooled_connection(conn)


def test_django_builds_its_pool_with_this_check(monkeypatch) -> None:
    for name in ("HEADWAY_DB_POOL_MAX_SIZE", "HEADWAY_DB_CONN_MAX_AGE"):
        monkeypatch.delenv(name, raising=False)
    settings = database_settings("postgres://postgres@127.0.0.1:5432/headway")
    assert settings["ENGINE"] == "config.postgresql"
    if connection.vendor == "postgresql" and connection.settings_dict["OPTIONS"].get("pool"):
        assert connection.pool._check is check_pooled_connection
    monkeypatch.setenv("HEADWAY_DB_POOL_MAX_SIZE", "0")  # an external pooler: Django's backend
    assert database_settings("postgres://postgres@127.0.0.1:5432/headway")["ENGINE"] == (
        "django.db.backends.postgresql"
    )
