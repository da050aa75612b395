"""The ``default`` database from ``DATABASE_URL`` and the ``HEADWAY_DB_*`` variables.

PostgreSQL goes through Django's connection pool (psycopg 3's ``psycopg_pool``, Django 5.1+):
each process (a gunicorn worker, a Celery worker) holds at most ``HEADWAY_DB_POOL_MAX_SIZE``
connections whatever its thread count, a request borrows one only while it runs, and a request
that waits longer than ``HEADWAY_DB_POOL_TIMEOUT_SECONDS`` for one is answered 503 with
``Retry-After`` (``registry.overload``). Persistent per-thread connections
(``HEADWAY_DB_CONN_MAX_AGE``) kept one connection per gunicorn thread that ever served a
request: 50 reporting trials and 20 readers exhausted PostgreSQL's default
``max_connections=100`` and the server answered 500 until restarted. A pooled
connection is checked before it is lent (``config.postgresql.base.check_pooled_connection``), so
a database restart costs no request a dead connection: a full check (an empty query, one round
trip) only when its socket has something to read, which is how a server that ended the session
announces it. ``HEADWAY_DB_POOL_MAX_SIZE=0`` turns the pool off (behind an external pooler such
as PgBouncer), and ``HEADWAY_DB_CONN_MAX_AGE`` applies again.

SQLite (the embedded default) has no connection limit: connections stay persistent per thread
(opening one costs a WAL checkpoint at close; bench/metrics_ingest.py), and the pool variables
are refused there rather than ignored.
"""

from __future__ import annotations

import os
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import envint, envstr

# Per process; the defaults keep a 2-worker gunicorn (2 x 16), a Celery worker and its beat
# under PostgreSQL's default max_connections=100 with room for psql and migrations.
DEFAULT_POOL_MAX_SIZE = 16
DEFAULT_POOL_MIN_SIZE = 2
DEFAULT_POOL_TIMEOUT_SECONDS = 10.0
DEFAULT_CONN_MAX_AGE = 600  # SQLite, or PostgreSQL without the pool
POOL_MAX_IDLE_SECONDS = 30.0
PREPARE_THRESHOLD = 5
# Seconds a client is asked to wait (``Retry-After``) when the database cannot serve it now
# (``registry.overload``) or its kind of request waited its turn too long (``config.admission``):
# a pool queue drains, or a restarting server accepts again, within a few seconds (the SDK backs
# off further on repeated 503s).
RETRY_AFTER_SECONDS = 2


def database_settings(url: str) -> dict[str, Any]:
    """``DATABASES["default"]`` for ``url`` (a dj-database-url URL) and the environment.

    Raises:
        ImproperlyConfigured: naming the variable, for a pool size below 1 (or a minimum above
            the maximum), a timeout not above 0, ``HEADWAY_DB_CONN_MAX_AGE`` set together with
            the pool (Django refuses persistent pooled connections), or a pool variable set on
            SQLite.
    """
    database: dict[str, Any] = dict(dj_database_url.parse(url, conn_health_checks=True))
    engine = database["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        given = []
        for name in (
            "HEADWAY_DB_POOL_MAX_SIZE",
            "HEADWAY_DB_POOL_MIN_SIZE",
            "HEADWAY_DB_POOL_TIMEOUT_SECONDS",
        ):
            if os.environ.get(name):
                given.append(name)
        if given:
            raise ImproperlyConfigured(
                f"{', '.join(given)}: the connection pool is for PostgreSQL; DATABASE_URL is "
                "SQLite (unset the variable)"
            )
        database["CONN_MAX_AGE"] = envint("HEADWAY_DB_CONN_MAX_AGE", DEFAULT_CONN_MAX_AGE)
        # WAL lets the web server read while the worker writes; IMMEDIATE takes the write lock
        # at BEGIN so two writers queue on the busy timeout instead of failing with "database
        # is locked".
        database["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
        return database
    max_size = envint("HEADWAY_DB_POOL_MAX_SIZE", DEFAULT_POOL_MAX_SIZE)
    if max_size < 0:
        raise ImproperlyConfigured(
            f"HEADWAY_DB_POOL_MAX_SIZE must be 0 (off) or more, got {max_size}"
        )
    if max_size == 0 or engine != "django.db.backends.postgresql":
        database["CONN_MAX_AGE"] = envint("HEADWAY_DB_CONN_MAX_AGE", DEFAULT_CONN_MAX_AGE)
        return database
    if envstr("HEADWAY_DB_CONN_MAX_AGE", "") not in ("", "0"):
        raise ImproperlyConfigured(
            "HEADWAY_DB_CONN_MAX_AGE must be unset or 0 while the connection pool is on "
            "(pooled connections go back to the pool after each request); set "
            "HEADWAY_DB_POOL_MAX_SIZE=0 to turn the pool off"
        )
    min_size = envint("HEADWAY_DB_POOL_MIN_SIZE", min(DEFAULT_POOL_MIN_SIZE, max_size))
    if not 0 <= min_size <= max_size:
        raise ImproperlyConfigured(
            f"HEADWAY_DB_POOL_MIN_SIZE must be 0 to HEADWAY_DB_POOL_MAX_SIZE ({max_size}), "
            f"got {min_size}"
        )
    raw_timeout = envstr("HEADWAY_DB_POOL_TIMEOUT_SECONDS", str(DEFAULT_POOL_TIMEOUT_SECONDS))
    try:
        timeout = float(raw_timeout)
    except ValueError:
        raise ImproperlyConfigured(
            f"HEADWAY_DB_POOL_TIMEOUT_SECONDS must be a number of seconds, got {raw_timeout!r}"
        ) from None
    if not timeout > 0:
        raise ImproperlyConfigured(
            f"HEADWAY_DB_POOL_TIMEOUT_SECONDS must be above 0, got {timeout:g}"
        )
    database["CONN_MAX_AGE"] = 0  # Django's pool requires it: connections return after use
    # Django's backend with a pool check that polls the socket before it spends a round trip
    # (check_pooled_connection); vendor and features are Django's.
    database["ENGINE"] = "config.postgresql"
    options = database.setdefault("OPTIONS", {})
    # Our own pool, so no external pooler between us and PostgreSQL: a statement run this many
    # times on a connection through a server-binding cursor is prepared there (psycopg's
    # default threshold; Django turns preparing off for poolers such as PgBouncer, and with the
    # pool off it stays off). Only the metric store's writes and a report's trial read use
    # such a cursor (registry.metrics._sql.prepared_cursor): parsing and planning a one-point
    # report's 8 kB write was half of that write's time.
    options["prepare_threshold"] = PREPARE_THRESHOLD
    options["pool"] = {
        "min_size": min_size,
        "max_size": max_size,
        "timeout": timeout,
        # Connections above min_size that sat unused this long are closed, so a process that
        # took many during a burst gives them back to the server for its siblings (under
        # max_connections pressure the other gunicorn worker answered 503 until they were).
        "max_idle": POOL_MAX_IDLE_SECONDS,
        # Wait at most this long for the server when (re)connecting before giving up.
        "reconnect_timeout": 60.0,
    }
    return database
