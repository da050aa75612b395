"""Django cursors for the registry's hot statements: prepared on PostgreSQL, and transaction
control sent in the same round trip as a statement (psycopg's pipeline mode).

No model is imported here, so ``registry.models`` and ``registry.metrics`` can both use it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection


@contextmanager
def prepared_cursor() -> Iterator[Any]:
    """Django's cursor for a statement run on every report, prepared by PostgreSQL when it can be.

    On PostgreSQL the cursor binds its parameters server-side (Django's ``ServerBindingCursor``
    instead of its default client-side one), so psycopg prepares a statement that ran
    ``prepare_threshold`` times on a connection (``config.database``: set with Headway's own
    pool, off with the pool off, where an external pooler may sit) and PostgreSQL stops parsing
    and planning it: the one-point report's 8 kB write went from 1.5-1.8 to 0.8 ms
    (docs/performance.md). Elsewhere (SQLite), and while Django logs queries (``DEBUG``, a
    test's ``CaptureQueriesContext``: psycopg keeps no SQL text of a prepared execution for the
    log), Django's usual cursor. Either way the cursor is Django's wrapper, so
    ``execute_wrapper`` sees its statements. The SQL must use ``%s`` placeholders and no
    literal ``%``.
    """
    if connection.vendor != "postgresql" or connection.queries_logged:
        with connection.cursor() as cursor:
            yield cursor
        return
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.ensure_connection()
    raw = connection.connection
    default = raw.cursor_factory
    raw.cursor_factory = ServerBindingCursor  # the lent connection is this thread's alone
    try:
        cursor = connection.cursor()
    finally:
        raw.cursor_factory = default
    with cursor:
        yield cursor


def execute_pipelined(
    cursor: Any, sql: str, params: Sequence[Any], *, begin: bool = False, commit: bool = False
) -> None:
    """Execute ``sql`` on ``cursor``; with ``begin`` / ``commit``, PostgreSQL's ``BEGIN`` before it
    / ``COMMIT`` after it go in the same round trip (psycopg's pipeline mode), on a transaction
    the caller runs while Django is in autocommit mode. Rows are read after this returns.

    An error of any of them is raised at the end, as Django's (``IntegrityError``, ...); what
    came after it was skipped and an open transaction is left failed (the caller sends
    ``ROLLBACK`` with ``transaction_command``).
    """
    if not (begin or commit):
        cursor.execute(sql, params)
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        if begin:
            transaction_command("BEGIN")
        cursor.execute(sql, params)
        if commit:
            transaction_command("COMMIT")


def transaction_command(command: str) -> None:
    """Send ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` on the driver's connection while Django is in
    autocommit mode (the caller runs the transaction). Never prepared; psycopg's ``rollback()``
    is not used because it also forgets every prepared statement of the connection."""
    with connection.wrap_database_errors:
        connection.connection.execute(command, prepare=False)
