"""Metric storage: a validated batch's writes, the per-trial summaries, in one transaction.

Reports are upserted on ``(trial, group, steps_completed)`` so retries never duplicate; a
report of a stored step merges per metric with the stored report of the same run, and a
resumed or restarted run supersedes what a failed run reported after its last checkpoint
(``registry.metrics._merge``).
Each trial keeps ``summary_metrics`` (last/min/max/count per metric) and ``best_validation``
so list pages never scan raw reports. Request bodies are validated in ``_parse``; the parts of
a batch computed in Python are in ``_batch``; the PostgreSQL one-point report's two round
trips in ``_pipelined``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction

from registry.lifecycle._common import refresh_experiment
from registry.lifecycle._time_search import deliver_validation_reports
from registry.metrics import _pipelined as pipelined
from registry.metrics import _store as store
from registry.metrics._aggregate import MAX_VALUE, MIN_VALUE, Agg
from registry.metrics._batch import (
    advance,
    check_series_budget,
    encoded_rows,
    merged_per_step,
    steps_by_group,
    summary_entry,
)
from registry.metrics._merge import merge_stored, stored_reports
from registry.metrics._parse import ReportIn
from registry.metrics._raw import COPY_MIN_ROWS, store_raw
from registry.metrics._trial_row import append_with_trial, save_trial
from registry.models import Experiment, Trial, lock_trial


def metrics_report(
    *,
    trial_id: int,
    reports: list[ReportIn],
    run_id: int | None = None,
    authorize: Callable[[Trial], None] | None = None,
) -> int:
    """Store a validated batch for one trial, idempotently; return the number of reports.

    In the same transaction: the raw reports (upserted on ``(trial, group, steps_completed)``,
    merged per metric with a stored report of the same run, the later value winning; replacing
    one of another run: ``registry.metrics._merge``), each touched series' aggregate and buckets
    (``registry.metrics._store``), the trial's ``summary_metrics``, ``steps_completed``,
    ``best_validation`` and fallback ``progress``, and the experiment's ``best_validation``; a
    searcher that asks for ``Event.VALIDATION_REPORTED`` hears of the validation reports
    (``registry.lifecycle._time_search``). Two reports of one step in a batch merge the same way
    (``merged_per_step``). ``authorize(trial)`` is called on the locked trial (its experiment loaded)
    before anything is written, so an access check costs no query of its own.

    A PostgreSQL batch of new steps of fewer than ``COPY_MIN_ROWS`` reports (the one-point
    report, a dashboard's or a logger's batch) is one statement after the trial's lock: raw
    rows, series, buckets and the trial's update, its summary predicted from the stored summary
    and the batch (``merged_entry``); the series' aggregates that statement returns are the
    truth, and a summary they contradict (series loaded without a summary,
    ``registry.metrics._bulk``) is written again with them, so the outcome is the same. A larger
    one (the SDK's reporter sends thousands of reports a POST) appends its raw rows with ``COPY``
    (``store_raw``).

    Django in autocommit mode (a request), such a batch without validation reports takes two
    round trips in all (``registry.metrics._pipelined``): ``BEGIN`` travels with the trial's
    lock and ``COMMIT`` with the one statement; a batch that turns out to need more (a stored
    step replaced, the experiment's progress to refresh) is rolled back there and stored here.

    Raises:
        Trial.DoesNotExist: when the trial is gone.
        Exception: whatever ``authorize`` raises (nothing is written then).
        InvalidInput: naming ``reports``: over ``HEADWAY_MAX_METRIC_SERIES_PER_TRIAL`` series.
    """
    received = len(reports)
    reports = merged_per_step(reports, run_id)
    if pipelined.eligible(reports) and pipelined.report(trial_id, reports, run_id, authorize):
        return received
    with transaction.atomic():
        # Lock the trial so concurrent batches of one trial merge one after the other; only
        # the trial (of=self): the lifecycle's lock order is trials before their experiment.
        trial = lock_trial(trial_id)
        if authorize is not None:
            authorize(trial)
        _store_batch(trial, reports, run_id)
    return received


def _store_batch(trial: Trial, reports: list[ReportIn], run_id: int | None) -> None:
    """``metrics_report``'s writes for the locked ``trial``, in the caller's transaction."""
    experiment = trial.experiment
    summary = trial.summary_metrics or {}
    check_series_budget(summary, reports)
    rows, points = encoded_rows(trial, reports, run_id)
    # No query unless a step lies at or below its group's high-water mark.
    stored = stored_reports(trial.id, summary, steps_by_group(reports))
    rebuild: dict[str, tuple[set[int], set[str]]] = {}
    if stored:
        rows, points, rebuild = merge_stored(rows, points, stored)
    plan = store.plan_append(points)
    fields, crossed = advance(trial, experiment, reports)
    if crossed:
        trial.save(update_fields=["progress"])
        refresh_experiment(experiment.id)
    written: dict | None = None  # the summary the one statement wrote, if it ran
    if not stored and len(rows) < COPY_MIN_ROWS and connection.vendor == "postgresql":
        added, written = append_with_trial(trial, summary, plan, rows, fields)
        fields = []
    else:
        store_raw(rows, append_only=not stored)
        added = store.append(trial.id, plan)
    changed: dict[tuple[str, str], Agg | None] = dict(added)
    # After the append: a rebuilt bucket is recomputed from the raw rows, appended points too.
    for group, (steps, names) in rebuild.items():
        changed.update(store.rebuild(trial.id, group, steps, names))
    for (group, name), agg in changed.items():
        if agg is None:
            summary.get(group, {}).pop(name, None)
        else:
            summary.setdefault(group, {})[name] = summary_entry(agg)
    trial.summary_metrics = summary
    if summary != written:
        fields.append("summary_metrics")
    searcher_series = ("validation", experiment.searcher_metric)
    if searcher_series in changed:
        fields.append("best_validation")
        trial.best_validation = _best_of(experiment, changed[searcher_series])
        if trial.best_validation is not None:
            experiment.offer_best_validation(trial.best_validation)
    if fields:
        save_trial(trial, fields)
    # A searcher that asks for them (adaptive_asha with time_metric) ranks trials by their
    # validations as they arrive.
    deliver_validation_reports(trial, experiment, reports)


def _best_of(experiment: Experiment, agg: Agg | None) -> float | None:
    """The best value of a searcher-metric series' aggregate (None when it has no number)."""
    if agg is None or agg[MIN_VALUE] is None:
        return None
    return agg[MIN_VALUE] if experiment.smaller_is_better else agg[MAX_VALUE]
