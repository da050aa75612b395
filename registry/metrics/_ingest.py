"""Metric storage: validated batch ingestion, per-trial summaries, and chart-ready series.

Reports are upserted on ``(trial, group, steps_completed)`` so retries never duplicate and a
resumed or restarted run supersedes what a failed run reported after its last checkpoint.
Each trial keeps ``summary_metrics`` (last/min/max/count per metric) and ``best_validation``
so list pages never scan raw reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any

from django.db import connection, transaction
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from headway.metric_values import chartable, encode_value
from registry.downsample import downsample_minmax
from registry.errors import InvalidInput
from registry.models import Experiment, MetricReport, Trial

MAX_REPORTS_PER_BATCH = 10_000

GroupName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
MetricName = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class ReportIn(BaseModel):
    """One report as posted by the SDK (see docs/rest-api.md)."""

    model_config = ConfigDict(extra="forbid")

    group: GroupName
    steps_completed: int = Field(ge=0)
    metrics: dict[MetricName, Any]
    run_id: int | None = Field(default=None, ge=0)
    epoch: float | None = None
    timestamp: datetime | None = None


_batch_adapter = TypeAdapter(list[ReportIn])


def _loc_to_field(loc: Iterable[Any]) -> str:
    out = "reports"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def parse_reports(payload: Any) -> list[ReportIn]:
    """Validate a POSTed ``{"reports": [...]}`` body.

    Metric values are any JSON value; non-finite floats (the bare ``NaN`` literals) are encoded
    as strings on storage, and the strings ``"NaN"``/``"Infinity"``/``"-Infinity"`` are kept as
    they are, so both spellings store and read back (as gaps) the same way.

    Raises:
        InvalidInput: naming ``reports[i].field`` (or ``reports[i].metrics.KEY``).
    """
    if not isinstance(payload, dict) or "reports" not in payload:
        raise InvalidInput({"reports": ["This field is required (a list of reports)."]})
    unknown = set(payload) - {"reports"}
    if unknown:
        raise InvalidInput({k: ["Unknown field; allowed: reports."] for k in sorted(unknown)})
    raw = payload["reports"]
    if isinstance(raw, list) and len(raw) > MAX_REPORTS_PER_BATCH:
        raise InvalidInput({"reports": [f"At most {MAX_REPORTS_PER_BATCH} reports per batch."]})
    try:
        reports = _batch_adapter.validate_python(raw)
    except PydanticValidationError as exc:
        errors: dict[str, list[str]] = {}
        for err in exc.errors():
            errors.setdefault(_loc_to_field(err["loc"]), []).append(err["msg"])
        raise InvalidInput(errors) from None
    return reports


def _merge_summary(summary: dict, group: str, step: int, metrics: dict[str, Any]) -> None:
    by_name = summary.setdefault(group, {})
    for name, value in metrics.items():
        number = chartable(value)
        entry = by_name.setdefault(
            name, {"last": None, "last_step": -1, "min": None, "max": None, "count": 0}
        )
        entry["count"] += 1
        if step >= entry["last_step"]:
            entry["last"] = number
            entry["last_step"] = step
        if number is not None:
            entry["min"] = number if entry["min"] is None else min(entry["min"], number)
            entry["max"] = number if entry["max"] is None else max(entry["max"], number)


def _rebuild_group_summary(trial: Trial, group: str) -> dict:
    summary: dict = {}
    rows = MetricReport.objects.filter(trial=trial, group=group).order_by("steps_completed")
    for step, metrics in rows.values_list("steps_completed", "metrics").iterator():
        _merge_summary(summary, group, step, metrics)
    return summary.get(group, {})


def _best_validation(experiment: Experiment, trial: Trial) -> float | None:
    name = experiment.searcher_metric
    rows = MetricReport.objects.filter(trial=trial, group="validation")
    best = None
    for metrics in rows.values_list("metrics", flat=True).iterator():
        value = chartable(metrics.get(name))
        if value is not None and experiment.is_better(value, best):
            best = value
    return best


def _group_high_water(summary: dict, group: str) -> int:
    """The highest step holding a metric in ``group``, from the summary (-1 when none).

    Every stored row with a metric contributed its step to some ``last_step``, so a batch whose
    steps all lie above this cannot replace a stored report: no query needed to know it.
    """
    return max((e["last_step"] for e in summary.get(group, {}).values()), default=-1)


_PG_TYPES = ("bigint", "varchar", "bigint", "integer", "double precision", "timestamptz", "jsonb")
_UPSERT_ROWS_PER_STATEMENT = 1000  # 7,000 parameters: under SQLite's 32,766 limit


def _upsert_rows(params: list[tuple]) -> None:
    """``INSERT .. ON CONFLICT (trial, group, step) DO UPDATE`` of ``MetricReport`` rows.

    Args:
        params: ``(trial_id, group, steps_completed, run_id, epoch, reported_at, metrics)``
            tuples; ``reported_at`` adapted for the database, ``metrics`` a JSON-able dict.

    Hand-written rather than ``bulk_create(update_conflicts=True)``: the ORM prepares every field
    of every model instance in Python, which was half the cost of a 100-report batch. One
    multi-row statement per 1,000 rows rather than ``executemany``: psycopg runs executemany as
    one pipelined statement per row, a network wait each. Valid for SQLite >= 3.24 and
    PostgreSQL >= 9.5.
    """
    q = connection.ops.quote_name
    cols = ("trial_id", "group", "steps_completed", "run_id", "epoch", "reported_at", "metrics")
    updates = ("metrics", "run_id", "epoch", "reported_at")
    head = f"INSERT INTO {q(MetricReport._meta.db_table)} ({', '.join(q(c) for c in cols)}) VALUES "
    tail = (
        f" ON CONFLICT ({q('trial_id')}, {q('group')}, {q('steps_completed')}) DO UPDATE SET "
        + ", ".join(f"{q(c)} = EXCLUDED.{q(c)}" for c in updates)
    )
    row = f"({', '.join(['%s'] * len(cols))})"
    if connection.vendor == "postgresql":
        # One jsonb parameter expanded server-side: psycopg neither parses a statement with
        # 7,000 placeholders nor waits once per row (executemany), and dumps one string.
        record = ", ".join(f"{q(c)} {t}" for c, t in zip(cols, _PG_TYPES, strict=True))
        rows = [dict(zip(cols, values, strict=True)) for values in params]
        with connection.cursor() as cursor:
            cursor.execute(
                head.replace(" VALUES ", " ")
                + f"SELECT * FROM jsonb_to_recordset(%s::jsonb) AS r({record})"
                + tail,
                [json.dumps(rows, default=str)],
            )
        return
    with connection.cursor() as cursor:
        for i in range(0, len(params), _UPSERT_ROWS_PER_STATEMENT):
            chunk = params[i : i + _UPSERT_ROWS_PER_STATEMENT]
            flat = [v for *values, metrics in chunk for v in (*values, json.dumps(metrics))]
            cursor.execute(head + ", ".join([row] * len(chunk)) + tail, flat)


def metrics_report(*, trial_id: int, reports: list[ReportIn], run_id: int | None = None) -> int:
    """Store a validated batch for one trial, idempotently; return the number of reports.

    Updates the trial's ``summary_metrics``, ``steps_completed`` and ``best_validation`` and the
    experiment's ``best_validation`` in the same transaction.

    Raises:
        Trial.DoesNotExist: when the trial is gone.
    """
    adapt_dt = connection.ops.adapt_datetimefield_value
    now = adapt_dt(timezone.now())
    with transaction.atomic():
        # Lock the trial so concurrent batches merge their summaries one after the other.
        trial = Trial.objects.select_for_update().select_related("experiment").get(id=trial_id)
        experiment = trial.experiment
        default_run = run_id or trial.run_id
        params = [
            (
                trial.id,
                r.group,
                r.steps_completed,
                r.run_id if r.run_id is not None else default_run,
                r.epoch,
                adapt_dt(r.timestamp) if r.timestamp else now,
                {k: encode_value(v) for k, v in r.metrics.items()},
            )
            for r in reports
        ]
        summary = trial.summary_metrics or {}
        by_group: dict[str, set[int]] = {}
        for r in reports:
            by_group.setdefault(r.group, set()).add(r.steps_completed)
        superseded = {
            group
            for group, steps in by_group.items()
            if min(steps) <= _group_high_water(summary, group)
            and MetricReport.objects.filter(
                trial_id=trial.id, group=group, steps_completed__in=steps
            ).exists()
        }
        _upsert_rows(params)
        for group in superseded:
            summary[group] = _rebuild_group_summary(trial, group)
        for r in reports:
            if r.group not in superseded:
                _merge_summary(summary, r.group, r.steps_completed, r.metrics)
        trial.summary_metrics = summary
        trial.steps_completed = max(trial.steps_completed, *(r.steps_completed for r in reports))
        fields = ["summary_metrics", "steps_completed"]
        if "validation" in by_group:
            if "validation" in superseded:
                trial.best_validation = _best_validation(experiment, trial)
            else:
                for r in reports:
                    value = chartable(r.metrics.get(experiment.searcher_metric))
                    if r.group == "validation" and value is not None:
                        if experiment.is_better(value, trial.best_validation):
                            trial.best_validation = value
            fields.append("best_validation")
            if trial.best_validation is not None and experiment.is_better(
                trial.best_validation, experiment.best_validation
            ):
                Experiment.objects.filter(id=experiment.id).update(
                    best_validation=trial.best_validation
                )
        trial.save(update_fields=fields)
    return len(params)


def read_series(
    *, trial_id: int, group: str | None = None, name: str | None = None, max_points: int = 2000
) -> list[dict[str, Any]]:
    """Every (group, name) series of a trial in step order, downsampled to ``max_points``.

    Returns a list of ``{"group", "name", "count", "downsampled", "steps", "values"}`` where
    ``values`` holds floats or None (non-finite or non-numeric values are gaps).
    """
    reports = MetricReport.objects.filter(trial_id=trial_id)
    if group:
        reports = reports.filter(group=group)
    rows = reports.order_by("group", "steps_completed").values_list(
        "group", "steps_completed", "metrics"
    )
    series: dict[tuple[str, str], tuple[list[int], list[float | None]]] = {}
    for row_group, step, metrics in rows.iterator(chunk_size=2000):
        for metric_name, value in metrics.items():
            if name and metric_name != name:
                continue
            steps, values = series.setdefault((row_group, metric_name), ([], []))
            steps.append(step)
            values.append(chartable(value))
    out = []
    for (row_group, metric_name), (steps, values) in sorted(series.items()):
        ds_steps, ds_values = downsample_minmax(steps, values, max_points)
        out.append(
            {
                "group": row_group,
                "name": metric_name,
                "count": len(steps),
                "downsampled": len(ds_steps) < len(steps),
                "steps": ds_steps,
                "values": ds_values,
            }
        )
    return out
