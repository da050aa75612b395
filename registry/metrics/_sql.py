"""Multi-row ``INSERT .. ON CONFLICT`` for SQLite and PostgreSQL, the one way metric rows are written.

Hand-written rather than ``bulk_create(update_conflicts=True)``: the ORM prepares every field of
every model instance in Python, which was half the cost of a 100-report batch, and it cannot
express the merge-on-conflict that aggregates need. On PostgreSQL the rows travel as one jsonb
parameter expanded server-side (``jsonb_to_recordset``): psycopg neither parses a statement with
thousands of placeholders nor waits once per row (``executemany`` is one pipelined statement per
row). On SQLite, ``executemany`` of a one-row statement (the driver steps one prepared statement
per row), or with ``RETURNING`` one multi-row ``VALUES`` per chunk under its 32,766-parameter
limit. JSON values are written with orjson (``json_text``). Valid for
SQLite >= 3.35 (``RETURNING``) and PostgreSQL >= 9.5. Rows known not to conflict can go
through PostgreSQL's ``COPY`` instead (``copy_rows``), faster from a few hundred rows
(docs/decisions/metrics.md).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import orjson
from django.db import connection

from registry.sql_cursor import prepared_cursor

_SQLITE_MAX_PARAMS = 30_000


def quote(name: str) -> str:
    """The column or table name quoted for the current database."""
    return connection.ops.quote_name(name)


def json_text(value: Any) -> str:
    """``value`` as JSON text: orjson (a tenth of ``json.dumps``'s time on a report's metrics),
    else ``json.dumps`` for what orjson refuses (integers beyond 64 bits, which a metric may be).

    Other types (datetimes, UUIDs) are written as orjson writes them or as ``str()``.
    """
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits
        return json.dumps(value, default=str)


def insert_clauses(
    table: str,
    names: Sequence[str],
    *,
    conflict: Sequence[str] = (),
    updates: Sequence[str] = (),
    returning: Sequence[str] = (),
) -> tuple[str, str]:
    """``("INSERT INTO table (names) ", " ON CONFLICT .. RETURNING ..")``: the SQL around the
    rows' source (``VALUES ..`` or ``SELECT ..``); the arguments are ``insert_rows``'s.

    Built once per database vendor and arguments: quoting every name of a batch's three inserts
    was ~0.15 ms of a 1,000-point POST's server time."""
    return _insert_clauses(
        connection.vendor, table, tuple(names), tuple(conflict), tuple(updates), tuple(returning)
    )


@functools.cache
def _insert_clauses(
    vendor: str,
    table: str,
    names: tuple[str, ...],
    conflict: tuple[str, ...],
    updates: tuple[str, ...],
    returning: tuple[str, ...],
) -> tuple[str, str]:
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in names)}) "
    tail = ""
    if conflict:
        action = "DO UPDATE SET " + ", ".join(updates) if updates else "DO NOTHING"
        tail += f" ON CONFLICT ({', '.join(quote(c) for c in conflict)}) {action}"
    if returning:
        tail += " RETURNING " + ", ".join(quote(c) for c in returning)
    return head, tail


def recordset(columns: Sequence[tuple[str, str]], alias: str = "r") -> str:
    """PostgreSQL: ``SELECT * FROM jsonb_to_recordset(%s::jsonb) AS r(col type, ..)``, the rows
    of one ``recordset_payload`` parameter as a table."""
    record = ", ".join(f"{quote(c)} {t}" for c, t in columns)
    return f"SELECT * FROM jsonb_to_recordset(%s::jsonb) AS {alias}({record})"


def recordset_payload(columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> str:
    """The JSON array of objects that ``recordset(columns)`` reads ``rows`` from."""
    keys = [c for c, _ in columns]
    return json_text([dict(zip(keys, row, strict=True)) for row in rows])


def insert_rows(
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    *,
    conflict: Sequence[str] = (),
    updates: Sequence[str] = (),
    returning: Sequence[str] = (),
) -> list[tuple]:
    """Insert ``rows`` into ``table``; on a ``conflict`` key, ``SET`` the ``updates`` clauses.

    Arguments:
        table: the table name (unquoted).
        columns: ``(name, postgres_type)`` of each value in a row, e.g. ``("count", "bigint")``;
            a ``jsonb`` column takes any JSON-able Python value.
        rows: one sequence of values per row, in ``columns`` order.
        conflict: the unique key's columns; empty for a plain insert.
        updates: ``SET`` clauses (SQL, may use ``EXCLUDED.col`` and ``table.col``); empty with
            a ``conflict`` means ``DO NOTHING``.
        returning: columns returned for every inserted or updated row.

    Returns:
        The ``returning`` tuples (in no particular order), or ``[]``.
    """
    if not rows:
        return []
    head, tail = insert_clauses(
        table, [c for c, _ in columns], conflict=conflict, updates=updates, returning=returning
    )
    if connection.vendor == "postgresql":
        with prepared_cursor() as cursor:
            cursor.execute(head + recordset(columns) + tail, [recordset_payload(columns, rows)])
            return list(cursor.fetchall()) if returning else []
    out: list[tuple] = []
    with connection.cursor() as cursor:
        json_cols = [i for i, (_, t) in enumerate(columns) if t == "jsonb"]
        per_chunk = max(1, _SQLITE_MAX_PARAMS // len(columns))
        placeholder = f"({', '.join(['%s'] * len(columns))})"
        if json_cols:
            lists = [list(row) for row in rows]
            for values in lists:
                for j in json_cols:
                    values[j] = json_text(values[j])
            rows = lists
        if not returning:
            # One prepared statement stepped per row in C: the multi-row VALUES text of a
            # 100-row batch cost more to build and to rewrite (Django's %s -> ? regex).
            cursor.executemany(head + "VALUES " + placeholder + tail, rows)
            return []
        for i in range(0, len(rows), per_chunk):
            chunk = rows[i : i + per_chunk]
            flat = [value for row in chunk for value in row]
            cursor.execute(head + "VALUES " + ", ".join([placeholder] * len(chunk)) + tail, flat)
            if returning:
                out.extend(cursor.fetchall())
    return out


def copy_rows(
    table: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]
) -> None:
    """Append ``rows`` to ``table`` with PostgreSQL's ``COPY FROM STDIN`` (no conflict handling).

    For rows that cannot collide with stored ones (the caller knows): a unique violation raises
    ``IntegrityError`` and aborts the transaction, so call it inside a savepoint when unsure.
    ``jsonb`` columns take any JSON-able value, as in ``insert_rows``.

    Raises:
        NotImplementedError: on another database than PostgreSQL.
    """
    if connection.vendor != "postgresql":
        raise NotImplementedError("copy_rows needs PostgreSQL")
    if not rows:
        return
    json_cols = {i for i, (_, t) in enumerate(columns) if t == "jsonb"}
    names = ", ".join(quote(c) for c, _ in columns)
    # The driver's own cursor (Django's has no COPY); its errors still become Django's.
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {quote(table)} ({names}) FROM STDIN") as copy,
    ):
        for row in rows:
            if json_cols:
                row = [json_text(v) if i in json_cols else v for i, v in enumerate(row)]
            copy.write_row(row)
