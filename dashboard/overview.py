"""What the metric charts and hyperparameter views of the dashboard need, as JSON for the page.

The charts themselves are drawn in the browser by ``static/js/charts.js`` from the REST metric
endpoints (``GET experiments/{id}/metrics/``, ``GET trials/{id}/metrics/``); the page embeds only
which metrics exist, which trials there are (label, hyperparameters for the hover) and the best
trial. Every function here runs a fixed number of queries whatever the number of trials or points.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Q
from django.urls import reverse

from dashboard.selectors import flatten_hparams
from headway.metric_values import chartable
from registry.models import Experiment, MetricSeries, Trial

VALIDATION = "validation"
TRAINING = "training"
SYSTEM_GROUP = "system"  # the SDK's group name (headway.core._system_metrics.SYSTEM_GROUP)


def metric_keys(where: Q) -> list[dict[str, str]]:
    """Every ``(group, name)`` with stored points among the series matching ``where`` (1 query).

    Ordered validation first, then training, then other groups, each by name: the order of the
    charts and of the metric picker.
    """
    pairs = (
        MetricSeries.objects.filter(where, count__gt=0)
        .values_list("group", "name")
        .distinct()
        .order_by()
    )
    rank = {VALIDATION: 0, TRAINING: 1}
    ordered = sorted(set(pairs), key=lambda p: (rank.get(p[0], 2), p[0], p[1]))
    return [{"group": group, "name": name} for group, name in ordered]


def best_trial_id(experiment: Experiment, trials: Sequence[Trial]) -> int | None:
    """The trial whose ``best_validation`` (searcher metric) is best; ties: the lower id."""
    best: Trial | None = None
    for trial in sorted(trials, key=lambda t: t.id):
        value = chartable(trial.best_validation)
        if value is None:
            continue
        if best is None or experiment.is_better(value, best.best_validation):
            best = trial
    return best.id if best else None


def hparam_columns(trials: Sequence[Trial]) -> list[str]:
    """The flattened hyperparameter names of ``trials`` (``optimizer.lr``), first-seen order."""
    seen: dict[str, None] = {}
    for trial in trials:
        for key, _ in getattr(trial, "hparams_flat", None) or flatten_hparams(trial.hparams):
            seen.setdefault(key, None)
    return list(seen)


def trial_entries(trials: Sequence[Trial], *, with_experiment: bool = False) -> list[dict]:
    """``[{"id", "label", "hparams": [[key, text]]}]`` for the charts' legend and hover."""
    out = []
    for trial in trials:
        label = f"Trial {trial.id}"
        if with_experiment:
            label = f"E{trial.experiment_id} T{trial.id}"
        pairs = getattr(trial, "hparams_flat", None) or flatten_hparams(trial.hparams)
        out.append({"id": trial.id, "label": label, "hparams": [[k, str(v)] for k, v in pairs]})
    return out


def experiment_chart_options(experiment: Experiment, trials: Sequence[Trial]) -> dict[str, Any]:
    """Options of the experiment overview's two ``HeadwayCharts.Board``s (1 query).

    The trials themselves are not embedded: the page fetches ``trials_data`` (at 1,000 trials
    it is ~100 KB, which would double the page). Returns:
        dict: ``sources`` (the experiment's metrics URL), ``metrics`` (``metric_keys`` without
        the ``system`` group), ``system`` (the ``system`` group's keys, charted in their own
        collapsed section), ``trials`` (empty), ``trialCount`` (for the point budget) and
        ``bestTrialId``.
    """
    url = reverse("registry-api:experiment-metrics", args=[experiment.id])
    keys = metric_keys(Q(trial__experiment_id=experiment.id))
    return {
        "sources": [{"url": url}],
        "metrics": [k for k in keys if k["group"] != SYSTEM_GROUP],
        "system": [k for k in keys if k["group"] == SYSTEM_GROUP],
        "trials": [],
        "trialCount": len(trials),
        "bestTrialId": best_trial_id(experiment, trials),
    }


def trial_chart_options(trial: Trial) -> dict[str, Any]:
    """Options of ``HeadwayCharts.Board`` for one trial's page (1 query)."""
    url = reverse("registry-api:trial-metrics", args=[trial.id])
    return {
        "sources": [{"url": url, "trialId": trial.id}],
        "metrics": metric_keys(Q(trial_id=trial.id)),
        "trials": trial_entries([trial]),
        "bestTrialId": None,
    }


def _hparam_value(value: Any) -> float | str | None:
    """A value the hparam charts can place: a number, else its text (categorical)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        return chartable(value)
    return None if value is None else str(value)


def hparam_data(experiment: Experiment, trials: Sequence[Trial]) -> dict[str, Any] | None:
    """Data of the parallel-coordinates and per-hparam scatter views of a search (no query).

    Returns None when there is nothing to compare (fewer than two trials or no hyperparameter
    that differs between them). Otherwise ``trials_data``.
    """
    if len(trials) < 2:
        return None
    data = trials_data(experiment, trials)
    return data if data["hparams"] else None


def trials_data(experiment: Experiment, trials: Sequence[Trial]) -> dict[str, Any]:
    """Every trial as the experiment page's scripts need it (no query), fetched by the page
    (``dashboard:experiment-trials-data``): the legend's search, top N and colours, the charts'
    labels and hover, the parallel coordinates and scatters.

    Returns ``{"metric", "smaller_is_better", "best" (``best_trial_id``), "columns" (every
    flattened hparam name), "hparams" (the names that vary), "trials": [{"id", "value"
    (best_validation or None), "hparams": {name: number or text}}]}``, trials in id order.
    """
    rows = []
    values: dict[str, set[str]] = {}
    for trial in trials:
        pairs = dict(getattr(trial, "hparams_flat", None) or flatten_hparams(trial.hparams))
        flat = {k: _hparam_value(v) for k, v in pairs.items()}
        for k, v in flat.items():
            values.setdefault(k, set()).add(repr(v))
        rows.append({"id": trial.id, "value": chartable(trial.best_validation), "hparams": flat})
    columns = hparam_columns(trials)
    varying = [k for k in columns if len(values.get(k, ())) > 1] if len(trials) > 1 else []
    return {
        "metric": experiment.searcher_metric,
        "smaller_is_better": experiment.smaller_is_better,
        "best": best_trial_id(experiment, trials),
        "columns": columns,
        "hparams": varying,
        "trials": rows,
    }
