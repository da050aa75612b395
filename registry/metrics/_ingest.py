"""Metric storage: validated batch ingestion, per-trial summaries, and chart-ready series.

Reports are upserted on ``(trial, group, steps_completed)`` so retries never duplicate and a
resumed or restarted run supersedes what a failed run reported after its last checkpoint.
Each trial keeps ``summary_metrics`` (last/min/max/count per metric) and ``best_validation``
so list pages never scan raw reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC
from typing import Annotated, Any, NotRequired

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pydantic import AwareDatetime, ConfigDict, Field, StringConstraints, TypeAdapter, with_config
from pydantic import ValidationError as PydanticValidationError
from typing_extensions import TypedDict

from headway.expconf import ConfigError, Length
from headway.metric_values import encode_and_chart, value_problem
from registry.errors import InvalidInput
from registry.lifecycle._common import refresh_experiment
from registry.lifecycle._time_search import deliver_validation_reports
from registry.metrics import _store as store
from registry.metrics._aggregate import COUNT, LAST_STEP, LAST_VALUE, MAX_VALUE, MIN_VALUE, Agg
from registry.metrics._raw import COPY_MIN_ROWS, datetime_adapter, raw_upsert, store_raw
from registry.metrics._trial_row import lock_trial, save_trial
from registry.models import Experiment, MetricReport, Trial

MAX_REPORTS_PER_BATCH = 10_000

GroupName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
MetricName = Annotated[str, StringConstraints(min_length=1, max_length=256)]


@with_config(ConfigDict(extra="forbid"))
class ReportIn(TypedDict):
    """One report as posted by the SDK (see docs/rest-api.md); validated as a plain dict.

    A ``TypedDict`` rather than a model: validating 10,000 reports into dicts (straight from
    the request's JSON) costs a fifth of building model instances.
    """

    group: GroupName
    # 64-bit and 32-bit columns: larger numbers are a 400, not an overflow (500). Strict: JSON
    # numbers only, so `true` or "5" is a 400 as the schema says (pydantic's lax mode takes them).
    steps_completed: Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)]
    metrics: dict[MetricName, Any]
    run_id: NotRequired[Annotated[int, Field(ge=0, le=2**31 - 1, strict=True)] | None]
    # A double-precision column: finite, so the stored value reads back as JSON.
    epoch: NotRequired[Annotated[float, Field(strict=True, allow_inf_nan=False)] | None]
    timestamp: NotRequired[AwareDatetime | None]


@with_config(ConfigDict(extra="forbid"))
class _Batch(TypedDict):
    reports: Annotated[list[ReportIn], Field(max_length=MAX_REPORTS_PER_BATCH)]


_batch_adapter = TypeAdapter(_Batch)


def _loc_to_field(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
        return "Unknown field; allowed: reports."
    if err["type"] == "too_long" and tuple(err["loc"]) == ("reports",):
        return f"At most {MAX_REPORTS_PER_BATCH} reports per batch."
    if err["type"] == "missing" and tuple(err["loc"]) == ("reports",):
        return "This field is required (a list of reports)."
    return err["msg"]


def parse_reports(payload: Any) -> list[ReportIn]:
    """Validate a POSTed ``{"reports": [...]}`` body (decoded JSON, or the raw JSON bytes).

    Raw bytes are validated without building Python objects first (pydantic's JSON parser,
    which also takes the bare ``NaN``/``Infinity`` literals). Metric values are any JSON
    value; non-finite floats are encoded as strings on storage, and the strings
    ``"NaN"``/``"Infinity"``/``"-Infinity"`` are kept as they are, so both spellings store
    and read back (as gaps) the same way.

    Raises:
        InvalidInput: naming ``reports[i].field`` (or ``reports[i].metrics.KEY``), also for more
            than ``HEADWAY_MAX_METRIC_NAMES_PER_REPORT`` metrics, a NUL character, a text value
            over ``MAX_TEXT_CHARS`` characters or a timestamp out of range in UTC.
    """
    try:
        if isinstance(payload, bytes | str):
            batch = _batch_adapter.validate_json(payload)
        else:
            batch = _batch_adapter.validate_python(payload)
    except PydanticValidationError as exc:
        errors: dict[str, list[str]] = {}
        for err in exc.errors():
            errors.setdefault(_loc_to_field(err["loc"]) or "reports", []).append(_message(err))
        raise InvalidInput(errors) from None
    _check_names_and_values(batch["reports"])
    return batch["reports"]


def _check_names_and_values(reports: list[ReportIn]) -> None:
    """At most ``HEADWAY_MAX_METRIC_NAMES_PER_REPORT`` metrics a report, no NUL character in
    names, every value storable (``headway.metric_values.value_problem``: no NUL, text of at
    most ``MAX_TEXT_CHARS`` characters, integers a float can hold), and every timestamp
    expressible in UTC (``9999-12-31T23:59:59-23:00`` is not; PostgreSQL refuses offsets past
    15:59). A timestamp is converted to UTC here, once. One bad value would fail the whole
    batch's insert, so the batch is refused naming it.

    Raises:
        InvalidInput: naming ``reports[i].metrics``, ``reports[i].metrics.KEY`` or
            ``reports[i].timestamp``.
    """
    limit = settings.HEADWAY_MAX_METRIC_NAMES_PER_REPORT
    for i, report in enumerate(reports):
        metrics = report["metrics"]
        if len(metrics) > limit:
            raise InvalidInput(
                {f"reports[{i}].metrics": [f"{len(metrics)} metrics; at most {limit} a report."]}
            )
        for name, value in metrics.items():
            if "\x00" in name:
                problem: str | None = "NUL characters are not allowed in metrics."
            elif type(value) is float:  # the usual value: nothing to check
                continue
            else:
                problem = value_problem(value)
            if problem is not None:
                shown = name.replace("\x00", "\\x00")
                raise InvalidInput({f"reports[{i}].metrics.{shown}": [problem]})
        stamp = report.get("timestamp")
        if stamp is not None:
            try:
                report["timestamp"] = stamp.astimezone(UTC)
            except OverflowError:
                raise InvalidInput(
                    {f"reports[{i}].timestamp": ["Out of range once converted to UTC."]}
                ) from None


def _check_series_budget(summary: dict, reports: list[ReportIn]) -> None:
    """At most ``HEADWAY_MAX_METRIC_SERIES_PER_TRIAL`` distinct (group, name) series a trial.

    Raises:
        InvalidInput: naming ``reports`` when this batch would go over the limit.
    """
    limit = settings.HEADWAY_MAX_METRIC_SERIES_PER_TRIAL
    known = sum(len(names) for names in summary.values())
    new = {
        (r["group"], name)
        for r in reports
        for name in r["metrics"]
        if name not in summary.get(r["group"], {})
    }
    if known + len(new) > limit:
        raise InvalidInput(
            {
                "reports": [
                    f"A trial may have at most {limit} metric series; this batch adds"
                    f" {len(new)} to {known}."
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

    Raises:
        Trial.DoesNotExist: when the trial is gone.
        Exception: whatever ``authorize`` raises (nothing is written then).
        InvalidInput: naming ``reports``: over ``HEADWAY_MAX_METRIC_SERIES_PER_TRIAL`` series.
    """
    received = len(reports)
    reports = _latest_per_step(reports)
    adapt_dt = datetime_adapter()
    now = adapt_dt(timezone.now())
    with transaction.atomic():
        # Lock the trial so concurrent batches of one trial merge one after the other; only
        # the trial (of=self): the lifecycle's lock order is trials before their experiment.
        trial = lock_trial(trial_id)
        if authorize is not None:
            authorize(trial)
        experiment = trial.experiment
        _check_series_budget(trial.summary_metrics or {}, reports)
        default_run = run_id or trial.run_id
        encoded: list[dict[str, Any]] = []
        points: dict[tuple[str, str], list[tuple[int, float | None]]] = {}
        for r in reports:
            stored = {}
            group, step = r["group"], r["steps_completed"]
            for name, value in r["metrics"].items():
                stored[name], number = encode_and_chart(value)
                points.setdefault((group, name), []).append((step, number))
            encoded.append(stored)
        rows = [
            (
                trial.id,
                r["group"],
                r["steps_completed"],
                default_run if r.get("run_id") is None else r["run_id"],
                r.get("epoch"),
                now if (stamp := r.get("timestamp")) is None else adapt_dt(stamp),
                metrics,
            )
            for r, metrics in zip(reports, encoded, strict=True)
        ]
        summary = trial.summary_metrics or {}
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
        appended = {key: pts for key, pts in points.items() if key[0] not in replaced}
        if not replaced and len(rows) < COPY_MIN_ROWS and connection.vendor == "postgresql":
            # One round trip for the raw rows, series and buckets (store.append's CTE).
            raw = raw_upsert(rows)
            added = store.append(trial.id, appended, with_statement=raw)
        else:
            store_raw(rows, append_only=not replaced)
            added = store.append(trial.id, appended)
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
        # A list, not varargs: an empty batch ({"reports": []}) leaves the step as it is.
        steps = [trial.steps_completed, *(r["steps_completed"] for r in reports)]
        trial.steps_completed = max(steps)
        fields = ["summary_metrics", "steps_completed"]
        if _fallback_progress(trial, experiment):
            fields.append("progress")
        searcher_series = ("validation", experiment.searcher_metric)
        if searcher_series in changed:
            fields.append("best_validation")
            trial.best_validation = _best_of(experiment, changed[searcher_series])
            if trial.best_validation is not None and experiment.is_better(
                trial.best_validation, experiment.best_validation
            ):
                Experiment.objects.filter(id=experiment.id).update(
                    best_validation=trial.best_validation
                )
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
    raw = experiment.config.get("searcher", {}).get("max_length")
    if raw is None or trial.progress >= 1.0:  # nothing to raise it to: skip the parsing
        return False
    try:
        length = Length.parse(raw, field="searcher.max_length")
        if trial.searcher_length:
            length = Length(unit=length.unit, value=trial.searcher_length)
        batches = length.to_batches(
            records_per_epoch=experiment.config.get("records_per_epoch"),
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


def report_batch_json_schema() -> dict[str, Any]:
    """The JSON Schema of a ``{"reports": [...]}`` body, self-contained (no ``$ref``), for the
    OpenAPI schema: generated from the validator itself, so the two cannot drift."""
    schema = _batch_adapter.json_schema()
    report = schema.pop("$defs")["ReportIn"]
    schema["properties"]["reports"]["items"] = report
    return schema
