"""Serializing placement passes without making heartbeats wait for them.

Two passes must never run at once (they would hand out the same free slot), so a pass holds a
PostgreSQL advisory lock, one per namespace (``lock_key``). A caller that must see its own
change placed (a run queued: ``wait=True``) waits for the lock. A host heartbeat that adds
capacity or a run's exit (``wait=False``) never waits: it announces a request (``nextval`` of the sequence
``headway_placement_requests``, which takes no lock and is not transactional), then only *tries*
the lock. The pass holding the lock reads the sequence when it starts and again after it
released the lock; if a request came meanwhile, it runs again (trying the lock: if someone else
holds it, that pass started after the request, or its own check at the end sees it). So a
request is never lost: its change is seen by a pass that started after it, the one it runs
itself or one it asked for.

A stream of requests could keep one caller re-running forever (and delay that host's next
heartbeat), so a call runs at most ``MAX_PASSES`` passes; the requests of a stream that long
are served by the pass its next request starts, and the periodic reaper pass bounds any wait.

On SQLite a pass is one ``IMMEDIATE`` transaction, which holds the database's write lock: every
pass (and every other writer, heartbeats included) waits for it. SQLite is for one host.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Generator, Iterator
from typing import Any

from django.conf import settings
from django.db import connection, transaction

# Class of the placement locks among PostgreSQL advisory locks (any constant no one else uses);
# each namespace has its own lock of this class (``lock_key``).
ADVISORY_LOCK_ID = 0x48575953  # "HWYS"
# Requests for a pass (PostgreSQL; created by migration 0012).
REQUESTS_SEQUENCE = "headway_placement_requests"
MAX_PASSES = 3
# A heartbeat's request in one round trip: the announcement first (the subquery's row exists
# before the outer select's lock attempt runs on it; OFFSET 0 keeps it from being flattened).
_ANNOUNCE_THEN_TRY = (
    f"SELECT pg_try_advisory_lock(%s, %s) FROM (SELECT nextval('{REQUESTS_SEQUENCE}') OFFSET 0)"
    " AS r"
)
_local = threading.local()


def lock_key(namespace: str | None = None) -> list[int]:
    """The placement lock of ``namespace`` (default this registry's, ``HEADWAY_QUEUE``):
    ``[class, key]``, two 32-bit integers for ``pg_advisory_lock(int, int)``.

    One lock per namespace, as a pass places one namespace's runs only: the holder of another
    namespace's lock (a second registry on the same database, like the test suite's clusters)
    must not be taken for the pass that serves this namespace's requests.
    """
    name = namespace or settings.CELERY_TASK_DEFAULT_QUEUE
    key = zlib.crc32(name.encode()) - 2**31  # signed 32-bit
    return [ADVISORY_LOCK_ID, key]


def serialized_passes(*, wait: bool, namespace: str | None = None) -> Generator[None, None, None]:
    """Yield once per pass this caller must run, each time holding the placement lock of
    ``namespace`` (default this registry's).

    Close the generator when a pass raises (``place_queued_runs`` does): that releases the
    lock (or rolls back SQLite's transaction) at once.

    Yields nothing when ``wait`` is False and another pass holds the lock (that pass runs
    again for this request), or when this thread is already inside a pass (the running pass
    sees what the nested call would have seen).
    """
    if getattr(_local, "placing", False):
        return
    _local.placing = True
    try:
        if connection.vendor != "postgresql":
            with transaction.atomic():  # SQLite: BEGIN IMMEDIATE takes the write lock
                yield
            return
        key = lock_key(namespace)
        if connection.in_atomic_block:
            yield from _in_transaction(wait, key)
        else:
            yield from _autocommit(wait, key)
    finally:
        _local.placing = False


def _query(sql: str, params: list[int] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def _requests() -> int:
    # ``last_value`` alone misses the first request a database ever gets: a fresh sequence has
    # last_value 1 before its first nextval (is_called false) and still 1 after it.
    return int(_query(f"SELECT last_value + is_called::int FROM {REQUESTS_SEQUENCE}"))


def _in_transaction(wait: bool, key: list[int]) -> Iterator[None]:
    # Inside a caller's transaction the lock is held until it ends (an aborted transaction
    # could not unlock), so there is no "after the unlock" to re-check: one pass at most.
    if wait:
        _query("SELECT pg_advisory_xact_lock(%s, %s)", key)
    elif not _query(_ANNOUNCE_THEN_TRY.replace("_lock(", "_xact_lock("), key):
        return
    yield


def _autocommit(wait: bool, key: list[int]) -> Iterator[None]:
    # One key for the lock and its unlock: unlocking another key (HEADWAY_QUEUE read again
    # after it changed, as a test's settings do) would leave this session holding the lock.
    if wait:
        _query("SELECT pg_advisory_lock(%s, %s)", key)
    elif not _query(_ANNOUNCE_THEN_TRY, key):
        return  # the holder re-runs for this request
    for attempt in range(MAX_PASSES):
        if attempt and not _query("SELECT pg_try_advisory_lock(%s, %s)", key):
            return  # the new holder serves them: its pass starts after them, or its check sees them
        seen = _requests()
        try:
            yield
        finally:
            _query("SELECT pg_advisory_unlock(%s, %s)", key)
        if _requests() == seen:
            return
