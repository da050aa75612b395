"""A small PostgreSQL batch of new steps in two round trips: the one-point report's path.

``metrics_report`` in a transaction costs four round trips: ``BEGIN``, the trial's locked
read, the one statement (raw rows, series, buckets, the trial's row), ``COMMIT``. Here, while
Django is in autocommit mode (a request, not inside ``atomic``), ``BEGIN`` is sent with the
locked read and ``COMMIT`` with the statement (psycopg's pipeline mode, ``execute_pipelined``),
the transaction run on the driver's connection. The writes are ``metrics_report``'s, locked
and atomic as there; what a batch needs beyond them sends it back to ``metrics_report``'s
transaction, so the code that writes elsewhere never runs inside this one:

- a validation report (the trial's and experiment's ``best_validation``, a time-metric
  searcher): known before the lock, the batch never comes here;
- a step at or below the group's stored high-water mark (it may merge with a stored report) or
  progress passing a whole percent (the experiment's progress is refreshed): known after the
  lock; the transaction is rolled back (nothing was written) and ``report`` returns False.

The statement's returned aggregates are the truth; a summary entry they contradict (series
loaded without a summary, ``registry.metrics._bulk``) is written again from the stored series
right after, under the trial's lock in a transaction of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction
from psycopg import Pipeline

from registry.lifecycle._time_search import VALIDATION_GROUP
from registry.metrics import _store as store
from registry.metrics._aggregate import AGG_FIELDS
from registry.metrics._batch import (
    advance,
    check_series_budget,
    encoded_rows,
    group_high_water,
    steps_by_group,
    summary_entry,
)
from registry.metrics._parse import ReportIn
from registry.metrics._raw import COPY_MIN_ROWS
from registry.metrics._trial_row import append_with_trial, save_trial
from registry.models import MetricSeries, Trial, lock_trial
from registry.sql_cursor import transaction_command

# Pipeline mode needs libpq >= 14 (psycopg[binary] bundles a newer one; a system libpq may not).
_PIPELINE_SUPPORTED = Pipeline.is_supported()


def eligible(reports: list[ReportIn]) -> bool:
    """Whether ``report`` may take this batch: PostgreSQL with pipeline mode, Django in
    autocommit mode, fewer than ``COPY_MIN_ROWS`` reports, none of them a validation report."""
    return (
        _PIPELINE_SUPPORTED
        and connection.vendor == "postgresql"
        and len(reports) < COPY_MIN_ROWS
        and not connection.in_atomic_block
        and connection.get_autocommit()
        and all(r["group"] != VALIDATION_GROUP for r in reports)
    )


def report(
    trial_id: int,
    reports: list[ReportIn],
    run_id: int | None,
    authorize: Callable[[Trial], None] | None,
) -> bool:
    """Store an ``eligible`` batch (one report per ``(group, steps_completed)``) in two round
    trips; False, with nothing written, when it needs ``metrics_report``'s transaction.

    Raises:
        Trial.DoesNotExist, InvalidInput, whatever ``authorize`` raises: as
            ``metrics_report``; the transaction is rolled back first.
    """
    try:
        trial = lock_trial(trial_id, begin=True)
        if authorize is not None:
            authorize(trial)
        summary = trial.summary_metrics or {}
        check_series_budget(summary, reports)
        written = _write_and_commit(trial, summary, reports, run_id)
    except BaseException:
        _roll_back()
        raise
    if written is None:
        _roll_back()
        return False
    added, predicted = written
    stale = [
        key
        for key, agg in added.items()
        if predicted.get(key[0], {}).get(key[1]) != summary_entry(agg)
    ]
    if stale:
        _rewrite_summary_entries(trial_id, stale)
    return True


def _write_and_commit(
    trial: Trial, summary: dict, reports: list[ReportIn], run_id: int | None
) -> tuple[dict, dict] | None:
    """The one statement and ``COMMIT`` (one round trip): ``append_with_trial``'s answer; None,
    before anything is sent, when the batch is not this path's."""
    if any(min(s) <= group_high_water(summary, g) for g, s in steps_by_group(reports).items()):
        return None
    fields, crossed = advance(trial, trial.experiment, reports)
    if crossed:
        return None
    rows, points = encoded_rows(trial, reports, run_id)
    return append_with_trial(trial, summary, store.plan_append(points), rows, fields, commit=True)


def _roll_back() -> None:
    """End the transaction ``lock_trial(begin=True)`` opened, if it is still open. A connection
    too broken for that is discarded by the pool when Django returns it."""
    if connection.connection is None:
        return
    try:
        transaction_command("ROLLBACK")
    except Exception:  # the caller raises the first error, not this one
        connection.errors_occurred = True


def _rewrite_summary_entries(trial_id: int, keys: list[tuple[str, str]]) -> None:
    """Write the ``(group, name)`` entries of the trial's summary from the series as stored,
    under the trial's lock (a report committed meanwhile is read, not overwritten)."""
    with transaction.atomic():
        trial = lock_trial(trial_id)
        summary = trial.summary_metrics or {}
        wanted = set(keys)
        stored = MetricSeries.objects.filter(
            trial_id=trial_id,
            group__in={group for group, _ in keys},
            name__in={name for _, name in keys},
        ).values_list("group", "name", *AGG_FIELDS)
        for group, name, *agg in stored:
            if (group, name) in wanted:
                summary.setdefault(group, {})[name] = summary_entry(tuple(agg))
        trial.summary_metrics = summary
        save_trial(trial, ["summary_metrics"])
