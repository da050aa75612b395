"""``lock_trial``: a trial row read locked for its transaction, with its experiment, in plain SQL.

Every metric report and checkpoint registration, and each lifecycle change of a trial, starts
with this read. Through the ORM (``select_for_update().select_related()``), compiling it was
about a third of a one-point report's server time and of a checkpoint registration's; here the
statement is built once per database vendor and the instances come from ``Model.from_db``
(the fields not read are deferred: reading one loads it, as the ORM would).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connection, models
from django.db.transaction import TransactionManagementError

from registry.models.experiment import BLOB_FIELDS, Experiment
from registry.models.trial import Trial
from registry.sql_cursor import execute_pipelined, prepared_cursor

# Never read by the writes that lock a trial: the packed model definition (up to megabytes)
# and the free texts.
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
    # NO KEY UPDATE, as every lifecycle lock: a row inserted in another transaction that
    # references the trial (a log line, a metric, a checkpoint) takes KEY SHARE on it, which
    # FOR UPDATE would block; a transaction that holds the trial's run and then inserts such a
    # row (a log batch) deadlocked with a pause waiting for that run.
    if vendor == "postgresql":
        sql += " FOR NO KEY UPDATE OF t"
    return sql, trial_cols, exp_cols


def lock_trial(trial_id: int, *, begin: bool = False) -> Trial:
    """The trial, row locked until the transaction ends, with ``trial.experiment`` loaded.

    Only the trial row is locked (``FOR UPDATE OF``): locking the experiment row at the same
    time would go against the lock order (trials before their experiment); concurrent pauses
    and reports deadlocked. The lock is ``FOR NO KEY UPDATE``: rows that reference the trial
    can still be inserted meanwhile.

    Arguments:
        begin: PostgreSQL, Django in autocommit mode: open the transaction here, its ``BEGIN``
            sent with the locking read (one round trip, ``execute_pipelined``); the caller
            ends it (``transaction_command``), also when this raises.

    Raises:
        Trial.DoesNotExist: when there is no such trial.
        TransactionManagementError: outside a transaction (``atomic``) without ``begin``, where
            the lock would end with the statement (as the ORM's ``select_for_update``).
    """
    if not begin and not connection.in_atomic_block:
        raise TransactionManagementError("lock_trial cannot be used outside of a transaction.")
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
