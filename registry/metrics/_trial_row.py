"""The trial row of a metric report written back in plain SQL (read locked with
``registry.models.lock_trial``).

Through the ORM, compiling the trial's UPDATE was part of the third of a one-point report's
server time that the locked read and this write took; here the statement is built from the
fields written, with no ORM compiler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

from registry.metrics import _store as store
from registry.metrics._aggregate import Agg
from registry.metrics._batch import predicted_summary
from registry.metrics._raw import raw_upsert
from registry.models import Trial
from registry.sql_cursor import prepared_cursor


def update_statement(trial: Trial, fields: Sequence[str]) -> tuple[str, list[Any]]:
    """``(UPDATE SQL, its parameters)`` writing the trial's ``fields`` (attribute names) with
    its current values: run alone (``save_trial``) or inside another statement."""
    q = connection.ops.quote_name
    sets, params = [], []
    for name in fields:
        field: Any = Trial._meta.get_field(name)
        sets.append(f"{q(field.column)} = %s")
        params.append(field.get_db_prep_save(getattr(trial, field.attname), connection))
    params.append(trial.pk)
    table = q(Trial._meta.db_table)
    return f"UPDATE {table} SET {', '.join(sets)} WHERE {q('id')} = %s", params


def save_trial(trial: Trial, fields: Sequence[str]) -> None:
    """``UPDATE`` the trial's ``fields`` (attribute names) with its current values, in one statement."""
    sql, params = update_statement(trial, fields)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)


def append_with_trial(
    trial: Trial,
    summary: dict,
    plan: store.AppendPlan,
    rows: list[tuple],
    fields: Sequence[str],
    *,
    commit: bool = False,
) -> tuple[dict[tuple[str, str], Agg], dict]:
    """PostgreSQL: a batch of new steps in one statement: its raw ``rows``, its series and
    buckets (``plan``) and the trial's ``fields`` with its ``summary_metrics`` predicted from the
    stored ``summary`` (``predicted_summary``). Returns ``(the series' aggregates as stored now,
    the summary written)``; the aggregates are the truth when the two disagree. ``commit``: as
    ``registry.metrics._store.append``."""
    written = predicted_summary(summary, plan.roots)
    trial.summary_metrics = written
    trial_update = update_statement(trial, [*fields, "summary_metrics"])
    added = store.append(
        trial.id, plan, with_statements=[raw_upsert(rows), trial_update], commit=commit
    )
    return added, written
