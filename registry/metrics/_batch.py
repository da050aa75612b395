"""A metric batch's parts computed in Python, before and around its writes (no queries).

Shared by the transaction of ``registry.metrics._ingest`` and the pipelined one of
``registry.metrics._pipelined``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone

from headway.expconf import ConfigError, Length
from headway.metric_values import encode_and_chart
from registry.errors import InvalidInput
from registry.metrics._aggregate import COUNT, LAST_STEP, LAST_VALUE, MAX_VALUE, MIN_VALUE, Agg
from registry.metrics._parse import ReportIn
from registry.metrics._raw import datetime_adapter
from registry.models import Experiment, Trial


def check_series_budget(summary: dict, reports: list[ReportIn]) -> None:
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


def group_high_water(summary: dict, group: str) -> int:
    """The highest step holding a metric in ``group``, from the summary (-1 when none).

    Every stored row with a metric contributed its step to some ``last_step``, so a batch whose
    steps all lie above this cannot replace a stored report: no query needed to know it.
    """
    by_name = summary.get(group, {})
    return max((e.get("last_step", -1) for e in by_name.values()), default=-1)


def summary_entry(agg: Agg) -> dict[str, Any]:
    """A series aggregate as ``Trial.summary_metrics[group][name]`` (docs/rest-api.md)."""
    return {
        "last": agg[LAST_VALUE],
        "last_step": agg[LAST_STEP],
        "min": agg[MIN_VALUE],
        "max": agg[MAX_VALUE],
        "count": agg[COUNT],
    }


def merged_per_step(reports: list[ReportIn], run_id: int | None = None) -> list[ReportIn]:
    """The batch with one report per ``(group, steps_completed)``.

    A later report of a step merges into the earlier one per metric (its values win, as when
    it comes in a later batch: ``registry.metrics._merge``) when both are of the same run (a
    report's own ``run_id``, else ``run_id``, the sender's), and replaces it whole otherwise;
    its ``epoch`` and ``timestamp`` are kept.
    """
    # The usual batch repeats no step: one set comprehension (in C) tells, as cheap as before.
    if len({(r["group"], r["steps_completed"]) for r in reports}) == len(reports):
        return reports
    latest: dict[tuple[str, int], ReportIn] = {}
    for r in reports:
        key = (r["group"], r["steps_completed"])
        earlier = latest.get(key)
        if earlier is not None and _run_of(earlier, run_id) == _run_of(r, run_id):
            r = {**r, "metrics": {**earlier["metrics"], **r["metrics"]}}
        latest[key] = r
    return list(latest.values())


def _run_of(report: ReportIn, run_id: int | None) -> int | None:
    """The run a report is stored under, as far as the batch knows (None: the trial's)."""
    own = report.get("run_id")
    return run_id if own is None else own


def merged_entry(old: dict[str, Any] | None, batch: Agg) -> dict[str, Any]:
    """The summary entry of a series after appending points whose aggregate is ``batch`` to
    points summarised by ``old`` (what the series upsert computes in SQL, for the fields a
    summary keeps). An entry without some field predicts ``batch`` alone."""
    new = summary_entry(batch)
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
        return summary_entry(batch)
    return new


def encoded_rows(
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


def _raised_progress(trial: Trial, experiment: Experiment) -> float | None:
    """The trial's fallback progress after its ``steps_completed`` rose: ``steps_completed /
    length`` (batches), or None when it does not rise.

    A script that never asks the searcher for operations reports no progress, so the length
    falls back to the trial's searcher operation, else ``searcher.max_length``, converted to
    batches (``records_per_epoch``, ``global_batch_size``). Never lowers a reported progress.

    Raises:
        StoredConfigInvalid: the experiment's stored config no longer validates.
    """
    if trial.progress >= 1.0:  # nothing to raise it to
        return None
    conf = experiment.conf
    length = conf.searcher.max_length
    if length is None:
        return None
    try:
        if trial.searcher_length:
            length = Length(unit=length.unit, value=trial.searcher_length)
        batches = length.to_batches(
            records_per_epoch=conf.records_per_epoch,
            global_batch_size=(trial.hparams or {}).get("global_batch_size"),
        )
    except ConfigError:
        return None
    progress = min(1.0, trial.steps_completed / batches) if batches > 0 else 0.0
    return progress if progress > trial.progress else None


def _crosses_percent(old: float, new: float) -> bool:
    """Whether progress going from ``old`` to ``new`` passes a whole percent: the experiment's
    progress is refreshed then only, keeping its row lock off the per-batch path."""
    return int(new * 100) > int(old * 100)


def steps_by_group(reports: list[ReportIn]) -> dict[str, list[int]]:
    """The batch's ``steps_completed`` per group."""
    by_group: dict[str, list[int]] = {}
    for r in reports:
        by_group.setdefault(r["group"], []).append(r["steps_completed"])
    return by_group


def predicted_summary(summary: dict, roots: dict[tuple[str, str], Agg]) -> dict:
    """``summary_metrics`` after appending points whose per-series aggregates are ``roots`` to
    the series ``summary`` describes (``merged_entry``): what the one statement writes."""
    written = {group: dict(names) for group, names in summary.items()}
    for (group, name), root in roots.items():
        old = summary.get(group, {}).get(name)
        written.setdefault(group, {})[name] = merged_entry(old, root)
    return written


def advance(
    trial: Trial, experiment: Experiment, reports: list[ReportIn]
) -> tuple[list[str], bool]:
    """Raise the trial's ``steps_completed`` to the batch's highest step and its fallback
    ``progress`` with it (``_raised_progress``), in memory; return ``(the fields changed, whether
    progress passed a whole percent)``. Neither depends on what is stored.

    Raises:
        StoredConfigInvalid: as ``_raised_progress``.
    """
    # A list, not varargs: an empty batch ({"reports": []}) leaves the step as it is.
    trial.steps_completed = max([trial.steps_completed, *(r["steps_completed"] for r in reports)])
    progress = _raised_progress(trial, experiment)
    if progress is None:
        return ["steps_completed"], False
    crossed = _crosses_percent(trial.progress, progress)
    trial.progress = progress
    return ["steps_completed", "progress"], crossed
