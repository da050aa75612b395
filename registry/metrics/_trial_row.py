"""The trial row of a metric report: read locked with its experiment, written back, in plain SQL.

Every report reads the trial (locked) and its experiment, and writes the trial's summary back.
Through the ORM, compiling those two statements was about a third of a one-point report's
server time; here each statement is built once per database vendor and the instances come from
``Model.from_db`` (the fields not read are deferred: reading one loads it, as the ORM would).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connection, models

from registry.metrics import _store as store
from registry.metrics._aggregate import Agg
from registry.metrics._batch import predicted_summary
from registry.metrics._raw import raw_upsert
from registry.metrics._sql import execute_pipelined, prepared_cursor
from registry.models import Experiment, Trial
from registry.models.experiment import BLOB_FIELDS

# Never read on the report path: the packed model definition (up to megabytes) and the texts.
_SKIPPED: dict[type[models.Model], set[str]] = {
    Trial: {"notes"},
    Experiment: {*BLOB_FIELDS, "description", "notes"},
}


def _fields(model: type[models.Model]) -> list[Any]:
    return [f for f in model._meta.concrete_fields if f.attname not in _SKIPPED[model]]


def _columns(model: type[models.Model]) -> list[str]:
    return [f.attname for f in _fields(model)]


@functools.cache
def _select_sql(vendor: str) -> tuple[str, list[str], list[str]]:
    q = connection.ops.quote_name
    trial_cols, exp_cols = _columns(Trial), _columns(Experiment)
    select = ", ".join(
        [f"t.{q(f.column)}" for f in _fields(Trial)]
        + [f"e.{q(f.column)}" for f in _fields(Experiment)]
    )
    sql = (
        f"SELECT {select} FROM {q(Trial._meta.db_table)} t"
        f" JOIN {q(Experiment._meta.db_table)} e ON e.{q('id')} = t.{q('experiment_id')}"
        f" WHERE t.{q('id')} = %s"
    )
    # SQLite has no row locks: its IMMEDIATE transactions already hold the write lock.
    if vendor == "postgresql":
        sql += " FOR UPDATE OF t"
    return sql, trial_cols, exp_cols


def lock_trial(trial_id: int, *, begin: bool = False) -> Trial:
    """The trial, row locked for the transaction, with ``trial.experiment`` loaded (not locked).

    Arguments:
        begin: PostgreSQL, Django in autocommit mode: open the transaction here, its ``BEGIN``
            sent with the locking read (one round trip, ``execute_pipelined``); the caller
            ends it (``transaction_command``), also when this raises.

    Raises:
        Trial.DoesNotExist: when there is no such trial.
    """
    sql, trial_cols, exp_cols = _select_sql(connection.vendor)
    with prepared_cursor() as cursor:
        execute_pipelined(cursor, sql, [trial_id], begin=begin)
        row = cursor.fetchone()
    if row is None:
        raise Trial.DoesNotExist(f"Trial {trial_id} does not exist.")
    converters = _converters(connection.vendor)
    values = [convert(v) if convert else v for convert, v in zip(converters, row, strict=True)]
    trial = Trial.from_db(connection.alias, trial_cols, values[: len(trial_cols)])
    experiment = Experiment.from_db(connection.alias, exp_cols, values[len(trial_cols) :])
    Trial.experiment.field.set_cached_value(trial, experiment)
    return trial


@functools.cache
def _converters(vendor: str) -> list[Any]:
    """Per selected column, the function turning the driver's value into the field's (or None).

    The database backend's converters (SQLite: text to datetime, JSON text to Python) and the
    field's ``from_db_value`` (JSON fields), as the ORM's compiler applies them.
    """
    out: list[Any] = []
    models_read: tuple[type[models.Model], ...] = (Trial, Experiment)
    for model in models_read:
        for field in _fields(model):
            expression = field.get_col(model._meta.db_table)
            steps = [
                *connection.ops.get_db_converters(expression),
                *expression.get_db_converters(connection),
            ]
            out.append(_chain(steps) if steps else None)
    return out


def _chain(steps: Sequence[Any]) -> Any:
    def convert(value: Any) -> Any:
        for step in steps:
            value = step(value, None, connection)
        return value

    return convert


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
