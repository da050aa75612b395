"""The raw report rows of a metric batch: how they are written on each database.

Upserted on ``(trial, group, steps_completed)``, a row of a stored step already merged with the
stored report (``registry.metrics._merge``); on PostgreSQL a batch known to hold only new steps joins its series' and buckets'
upserts in one statement (``raw_upsert``) below ``COPY_MIN_ROWS`` reports, and is appended with
``COPY`` from there (``store_raw``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, connection, transaction

from registry.metrics._sql import (
    copy_rows,
    insert_clauses,
    insert_rows,
    quote,
    recordset,
    recordset_payload,
)
from registry.models import MetricReport

# From this many reports a PostgreSQL batch of new steps appends its raw rows with COPY; below,
# they join the one statement (measured crossover ~250 rows: docs/decisions/metrics.md).
COPY_MIN_ROWS = 256

RAW_COLUMNS = [
    ("trial_id", "bigint"),
    ("group", "varchar"),
    ("steps_completed", "bigint"),
    ("run_id", "integer"),
    ("epoch", "double precision"),
    ("reported_at", "timestamptz"),
    ("metrics", "jsonb"),
]
_RAW_UPDATES = [
    f"{quote(c)} = EXCLUDED.{quote(c)}" for c in ("metrics", "run_id", "epoch", "reported_at")
]


_RAW_KEY = ("trial_id", "group", "steps_completed")


@functools.cache
def _raw_upsert_sql() -> str:
    """PostgreSQL: the raw rows' upsert from one ``recordset_payload`` parameter."""
    head, tail = insert_clauses(
        MetricReport._meta.db_table,
        [c for c, _ in RAW_COLUMNS],
        conflict=_RAW_KEY,
        updates=_RAW_UPDATES,
    )
    return head + recordset(RAW_COLUMNS) + tail


def datetime_adapter() -> Callable[[datetime], Any]:
    """How a timezone-aware datetime is passed to the database, cheaply.

    SQLite stores naive UTC text, which Django's adapter makes in ~7 us per value (a tenth of
    a one-metric report's ingestion); the same text from ``astimezone`` + ``isoformat`` costs
    a third of that. PostgreSQL takes the datetime itself.
    """
    if connection.vendor == "sqlite":
        return lambda value: value.astimezone(UTC).replace(tzinfo=None).isoformat(" ")
    return connection.ops.adapt_datetimefield_value


def raw_upsert(rows: list[tuple]) -> tuple[str, list[str]]:
    """PostgreSQL: ``(upsert SQL, [its one parameter])`` of ``rows``, to run inside another
    statement (``registry.metrics._store.append``'s ``with_statements``)."""
    return _raw_upsert_sql(), [recordset_payload(RAW_COLUMNS, rows)]


def store_raw(rows: list[tuple], *, append_only: bool) -> None:
    """Write the raw report rows: upserted, or on PostgreSQL appended with ``COPY`` when no stored
    row has their steps (``append_only``, known from the summary's high-water marks).

    ``metrics_report`` sends an append-only batch of fewer than ``COPY_MIN_ROWS`` reports through
    its one statement (``raw_upsert``) instead: ``COPY`` inside its savepoint costs four round
    trips and separate statements for series and buckets, which a few hundred rows do not pay
    back; from 1,000 one-metric rows on it takes 0.65-0.85 of the one statement's time. A stored
    row the summary does not know of (a report without metrics) makes the ``COPY`` fail inside
    its savepoint; the batch is then upserted as usual, so nothing is lost.
    """
    if append_only and connection.vendor == "postgresql":
        try:
            with transaction.atomic():
                copy_rows(MetricReport._meta.db_table, RAW_COLUMNS, rows)
            return
        except IntegrityError:
            pass
    insert_rows(
        MetricReport._meta.db_table, RAW_COLUMNS, rows, conflict=_RAW_KEY, updates=_RAW_UPDATES
    )
