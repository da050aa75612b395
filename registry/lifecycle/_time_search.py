"""Validation reports for searchers that ask for them (``Event.VALIDATION_REPORTED``).

Such a searcher watches its trials' validation metrics, e.g. Determined 0.38's ASHA form with a
``time_metric``, which gives trials no operations. Each validation report that holds the
searcher metric (and ``searcher.time_metric``, when the config has one) is delivered as
``on_validation_reported(request_id, metric, time)``, in step order, in the transaction that
stores it (trial row locked, then the experiment's: the lifecycle's lock order); ``time`` is
the report's ``time_metric``, else its ``steps_completed``. A report that lacks one of them
cannot be ranked: the trial's log says so (Determined fails the whole search there; one line
the user sees is kinder and still not silent).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from django.utils import timezone

from registry.lifecycle._search import deliver_event
from registry.models import Experiment, Trial, TrialLog
from registry.searcher import Event, searcher_wants

VALIDATION_GROUP = "validation"
_NON_FINITE = ("NaN", "Infinity", "-Infinity")


def time_metric_of(experiment: Experiment) -> str | None:
    """The experiment's ``searcher.time_metric`` (None for searchers without one)."""
    return getattr(experiment.conf.searcher, "time_metric", None)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def deliver_validation_reports(
    trial: Trial, experiment: Experiment, reports: Iterable[Mapping[str, Any]]
) -> None:
    """Hand a batch's validation reports to a searcher that asks for them (see the module
    docstring); nothing for a searcher that does not.

    Arguments:
        trial: the reporting trial, row locked by the caller.
        experiment: its experiment (the row is locked here, per report delivered).
        reports: ``{"group", "steps_completed", "metrics"}`` mappings (other groups skipped).
    """
    if trial.is_terminal:
        return
    validations = sorted(
        (r for r in reports if r["group"] == VALIDATION_GROUP), key=lambda r: r["steps_completed"]
    )
    if not validations or not searcher_wants(experiment.conf, Event.VALIDATION_REPORTED):
        return
    time_metric = time_metric_of(experiment)
    metric_name = experiment.searcher_metric
    name = experiment.conf.searcher.name
    for report in validations:
        metrics = report["metrics"]
        steps = report["steps_completed"]
        time = float(steps) if time_metric is None else _number(metrics.get(time_metric))
        raw = metrics.get(metric_name)
        # NaN / infinities arrive as strings (headway.metric_values); they rank last.
        metric = math.nan if raw in _NON_FINITE else _number(raw)
        if time is None or metric is None:
            missing = time_metric if time is None else metric_name
            if time_metric is None:
                ranks = f"{name} ranks a trial only by validations reporting '{metric_name}'"
            else:
                ranks = (
                    f"{name} (time_metric: {time_metric}) ranks a trial only by validations "
                    f"reporting both '{metric_name}' and '{time_metric}'"
                )
            _log(
                trial,
                f"[headway] searcher: the validation at step {steps} has no number "
                f"'{missing}'; {ranks}, so this one was not used",
            )
            continue
        _raise_progress(trial, experiment, time)
        value = metric
        request_id = trial.request_id
        deliver_event(
            trial,
            Event.VALIDATION_REPORTED,
            lambda s: s.on_validation_reported(request_id, value, time),  # noqa: B023
        )
        if trial.searcher_closed:
            at = f"step {steps}" if time_metric is None else f"{time_metric}={time:g}"
            _log(
                trial,
                f"[headway] searcher: {name} stops this trial at {at} "
                f"({metric_name}={value:g}); it checkpoints and ends COMPLETED",
            )
            return


def _raise_progress(trial: Trial, experiment: Experiment, time: float) -> None:
    """A trial's progress is at least ``time / max_time`` (the top rung is the end)."""
    max_time = getattr(experiment.conf.searcher, "max_time", None)
    if max_time is None:
        return
    progress = min(time / max_time, 1.0)
    if progress > trial.progress:
        trial.progress = progress
        trial.save(update_fields=["progress"])


def _log(trial: Trial, message: str) -> None:
    TrialLog.objects.create(
        trial=trial, run_id=trial.run_id or 0, message=message, timestamp=timezone.now()
    )
