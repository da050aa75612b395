"""Metric storage: a validated batch's writes, the per-trial summaries, in one transaction.

Reports are upserted on ``(trial, group, steps_completed)`` so retries never duplicate and a
resumed or restarted run supersedes what a failed run reported after its last checkpoint.
Each trial keeps ``summary_metrics`` (last/min/max/count per metric) and ``best_validation``
so list pages never scan raw reports. Request bodies are validated in ``_parse``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from headway.expconf import ConfigError, Length
from headway.metric_values import encode_and_chart
from registry.errors import InvalidInput
from registry.lifecycle._common import refresh_experiment
from registry.lifecycle._time_search import deliver_validation_reports
from registry.metrics import _store as store
from registry.metrics._aggregate import COUNT, LAST_STEP, LAST_VALUE, MAX_VALUE, MIN_VALUE, Agg
from registry.metrics._parse import ReportIn
from registry.metrics._raw import COPY_MIN_ROWS, datetime_adapter, raw_upsert, store_raw
from registry.metrics._trial_row import lock_trial, save_trial, update_statement
from registry.models import Experiment, MetricReport, Trial


def _check_series_budget(summary: dict, reports: list[ReportIn]) -> None:
    """At most ``HEADWAY_MAX_METRIC_SERIES_PER_TRIAL`` distinct (group, name) series a trial.

    Raises:
        InvalidInput: naming ``reports`` when this batch would go over the limit.
    """
    limit = settings.HEADWAY_MAX_METRIC_SERIES_PER_TRIAL
    known = sum(len(names) for names in summary.values())
    # Names per group as sets (filled from each report's keys in C), not a tuple per point.
    by_group: dict[str, set[str]] = {}
    for r in reports:
        names = by_group.get(r["group"])
        if names is None:
            names = by_group[r["group"]] = set()
        names.update(r["metrics"])
    new = sum(len(names.difference(summary.get(g, ()))) for g, names in by_group.items())
    if known + new > limit:
        raise InvalidInput(
            {
                "reports": [
                    f"A trial may have at most {limit} metric series; this batch adds"
                    f" {new} to {known}."
                ]
            }
        )


def _group_high_water(summary: dict, group: str) -> int:
    """The highest step holding a metric in ``group``, from the summary (-1 when none).

    Every stored row with a metric contributed its step to some ``last_step``, so a batch whose
    steps all lie above this cannot replace a stored report: no query needed to know it.
    """
    by_name = summary.get(group, {})
    return max((e.get("last_step", -1) for e in by_name.values()), default=-1)


def _summary_entry(agg: Agg) -> dict[str, Any]:
    """A series aggregate as ``Trial.summary_metrics[group][name]`` (docs/rest-api.md)."""
    return {
        "last": agg[LAST_VALUE],
        "last_step": agg[LAST_STEP],
        "min": agg[MIN_VALUE],
        "max": agg[MAX_VALUE],
        "count": agg[COUNT],
    }


def _latest_per_step(reports: list[ReportIn]) -> list[ReportIn]:
    """The batch with one report per ``(group, steps_completed)``: the last one sent wins."""
    latest = {(r["group"], r["steps_completed"]): r for r in reports}
    return list(latest.values()) if len(latest) < len(reports) else reports


def _merged_entry(old: dict[str, Any] | None, batch: Agg) -> dict[str, Any]:
    """The summary entry of a series after appending points whose aggregate is ``batch`` to
    points summarised by ``old`` (what the series upsert computes in SQL, for the fields a
    summary keeps). An entry without some field predicts ``batch`` alone."""
    new = _summary_entry(batch)
    try:
        if old is None:
            return new
        new["count"] = old["count"] + batch[COUNT]
        if old["last_step"] >= batch[LAST_STEP]:
            new["last"], new["last_step"] = old["last"], old["last_step"]
        if old["min"] is not None and (batch[MIN_VALUE] is None or batch[MIN_VALUE] >= old["min"]):
            new["min"] = old["min"]
        if old["max"] is not None and (batch[MAX_VALUE] is None or batch[MAX_VALUE] <= old["max"]):
            new["max"] = old["max"]
    except (KeyError, TypeError):
        return _summary_entry(batch)
    return new


def _encoded_rows(
    trial: Trial, reports: list[ReportIn], run_id: int | None
) -> tuple[list[tuple], dict[tuple[str, str], list[tuple[int, float | None]]]]:
    """The raw rows of ``reports`` (values encoded once) and their chartable points per series."""
    adapt_dt = datetime_adapter()
    now = adapt_dt(timezone.now())
    default_run = run_id or trial.run_id
    rows: list[tuple] = []
    points: dict[tuple[str, str], list[tuple[int, float | None]]] = {}
    for r in reports:
        group, step = r["group"], r["steps_completed"]
        stored = metrics = r["metrics"]
        for name, value in metrics.items():
            # encode_and_chart's own first case, inlined: a finite float (nearly every value)
            # is stored and charted as it is, and the report's own dict is stored unless some
            # value needs encoding (a call per value was a third of this loop).
            if type(value) is float and value - value == 0.0:
                number: float | None = value
            else:
                if stored is metrics:
                    stored = dict(metrics)
                stored[name], number = encode_and_chart(value)
            key = (group, name)
            series = points.get(key)
            if series is None:
                series = points[key] = []
            series.append((step, number))
        rows.append(
            (
                trial.id,
                group,
                step,
                default_run if r.get("run_id") is None else r["run_id"],
                r.get("epoch"),
                now if (stamp := r.get("timestamp")) is None else adapt_dt(stamp),
                stored,
            )
        )
    return rows, points


def metrics_report(
    *,
    trial_id: int,
    reports: list[ReportIn],
    run_id: int | None = None,
    authorize: Callable[[Trial], None] | None = None,
) -> int:
    """Store a validated batch for one trial, idempotently; return the number of reports.

    In the same transaction: the raw reports (upserted on ``(trial, group, steps_completed)``),
    each touched series' aggregate and buckets (``registry.metrics._store``), the trial's
    ``summary_metrics``, ``steps_completed``, ``best_validation`` and fallback ``progress``,
    and the experiment's ``best_validation``; a searcher with ``time_metric`` hears of the
    validation reports (``registry.lifecycle._time_search``). Two reports of one step in a batch:
    the later wins. ``authorize(trial)`` is called on the locked trial (its experiment loaded)
    before anything is written, so an access check costs no query of its own.

    A PostgreSQL batch of new steps of fewer than ``COPY_MIN_ROWS`` reports (the one-point
    report, a dashboard's or a logger's batch) is one statement after the trial's lock: raw
    rows, series, buckets and the trial's update, its summary predicted from the stored summary
    and the batch (``_merged_entry``); the series' aggregates that statement returns are the
    truth, and a summary they contradict (series loaded without a summary,
    ``registry.metrics._bulk``) is written again with them, so the outcome is the same. A larger
    one (the SDK's reporter sends thousands of reports a POST) appends its raw rows with ``COPY``
    (``store_raw``).

    Raises:
        Trial.DoesNotExist: when the trial is gone.
        Exception: whatever ``authorize`` raises (nothing is written then).
        InvalidInput: naming ``reports``: over ``HEADWAY_MAX_METRIC_SERIES_PER_TRIAL`` series.
    """
    received = len(reports)
    reports = _latest_per_step(reports)
    with transaction.atomic():
        # Lock the trial so concurrent batches of one trial merge one after the other; only
        # the trial (of=self): the lifecycle's lock order is trials before their experiment.
        trial = lock_trial(trial_id)
        if authorize is not None:
            authorize(trial)
        experiment = trial.experiment
        summary = trial.summary_metrics or {}
        _check_series_budget(summary, reports)
        rows, points = _encoded_rows(trial, reports, run_id)
        by_group: dict[str, list[int]] = {}
        for r in reports:
            by_group.setdefault(r["group"], []).append(r["steps_completed"])
        replaced = {
            group
            for group, steps in by_group.items()
            if min(steps) <= _group_high_water(summary, group)
            and MetricReport.objects.filter(
                trial_id=trial.id, group=group, steps_completed__in=steps
            ).exists()
        }
        plan = store.plan_append({k: pts for k, pts in points.items() if k[0] not in replaced})
        # The step and the fallback progress do not depend on what is stored: known before.
        # A list, not varargs: an empty batch ({"reports": []}) leaves the step as it is.
        trial.steps_completed = max(
            [trial.steps_completed, *(r["steps_completed"] for r in reports)]
        )
        fields = ["steps_completed"]
        if _fallback_progress(trial, experiment):
            fields.append("progress")
        written: dict | None = None  # the summary the one statement wrote, if it ran
        if not replaced and len(rows) < COPY_MIN_ROWS and connection.vendor == "postgresql":
            written = {group: dict(names) for group, names in summary.items()}
            for (group, name), root in plan.roots.items():
                old = summary.get(group, {}).get(name)
                written.setdefault(group, {})[name] = _merged_entry(old, root)
            trial.summary_metrics = written
            trial_update = update_statement(trial, [*fields, "summary_metrics"])
            added = store.append(trial.id, plan, with_statements=[raw_upsert(rows), trial_update])
            fields = []
        else:
            store_raw(rows, append_only=not replaced)
            added = store.append(trial.id, plan)
        changed: dict[tuple[str, str], Agg | None] = dict(added)
        for group in replaced:
            summary[group] = {}
            changed.update(store.rebuild(trial.id, group, by_group[group]))
        for (group, name), agg in changed.items():
            if agg is None:
                summary.get(group, {}).pop(name, None)
            else:
                summary.setdefault(group, {})[name] = _summary_entry(agg)
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
        # adaptive_asha with time_metric ranks trials by their validations as they arrive.
        deliver_validation_reports(trial, experiment, reports)
    return received


def _best_of(experiment: Experiment, agg: Agg | None) -> float | None:
    """The best value of a searcher-metric series' aggregate (None when it has no number)."""
    if agg is None or agg[MIN_VALUE] is None:
        return None
    return agg[MIN_VALUE] if experiment.smaller_is_better else agg[MAX_VALUE]


def _fallback_progress(trial: Trial, experiment: Experiment) -> bool:
    """Raise ``trial.progress`` to ``steps_completed / length`` (batches); True if it changed.

    A script that never asks the searcher for operations reports no progress, so the length
    falls back to the trial's searcher operation, else ``searcher.max_length``, converted to
    batches (``records_per_epoch``, ``global_batch_size``). Never lowers a reported progress.
    The experiment's progress is refreshed at most once per whole percent, keeping the
    experiment row lock off the per-batch path.
    """
    if trial.progress >= 1.0:  # nothing to raise it to
        return False
    conf = experiment.conf
    length = conf.searcher.max_length
    if length is None:
        return False
    try:
        if trial.searcher_length:
            length = Length(unit=length.unit, value=trial.searcher_length)
        batches = length.to_batches(
            records_per_epoch=conf.records_per_epoch,
            global_batch_size=(trial.hparams or {}).get("global_batch_size"),
        )
    except ConfigError:
        return False
    progress = min(1.0, trial.steps_completed / batches) if batches > 0 else 0.0
    if progress <= trial.progress:
        return False
    crossed = int(progress * 100) > int(trial.progress * 100)
    trial.progress = progress
    if crossed:
        trial.save(update_fields=["progress"])
        refresh_experiment(experiment.id)
    return True
