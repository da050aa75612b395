"""Hyperparameter importance for a metric of a search, computed with a random forest.

The method is the one Weights & Biases' "Parameter importance" panel uses
(https://docs.wandb.ai/guides/app/features/panels/parameter-importance/): fit a random forest
with the hyperparameters as features and the metric as the target, and report each feature's
importance (scikit-learn's ``RandomForestRegressor.feature_importances_``, the mean decrease in
impurity of Breiman, "Random Forests", Machine Learning 45, 2001), beside the linear (Pearson)
correlation of each numeric hyperparameter with the metric.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np
from django.core.cache import cache

from headway.expconf import flatten_hparams
from registry.errors import InvalidInput, RegistryError
from registry.models import Experiment, Trial

# Fewer trials than this give importances that are mostly noise (a forest of bootstrap samples
# of four points); docs/decisions/dashboard.md.
MIN_TRIALS = 5
# Enough trees for stable importances on searches of up to a few thousand trials; fixed seed so
# that the same trials always give the same answer.
N_ESTIMATORS = 100
SEED = 0
# A fit costs ~0.1-0.3 s at 1,000 trials (docs/performance.md); the same trials and values give
# the same answer, so it is kept under a hash of them and a page reload or a second viewer reuses it.
CACHE_SECONDS = 3600
# Categorical value of a trial that lacks a hyperparameter (conditional or nested hparams).
MISSING = "(none)"
# float32 is what the forest's trees compare in: larger magnitudes would become infinite.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class NotEnoughTrials(RegistryError):
    """409: the search has too few trials with a value of the metric yet."""

    status = 409


def _is_number(value: Any) -> bool:
    """A number a float holds (booleans are categories; an integer past float range is text)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _metric_values(experiment: Experiment, metric: str) -> list[tuple[dict[str, Any], float]]:
    """``(hparams, value)`` of each trial with a finite value of ``metric``.

    For the searcher metric the value is the trial's best validation value (the one the searcher
    and the charts rank by); for another validation metric, its last reported value (what W&B
    calls the run's summary). Raises InvalidInput naming ``metric`` when no trial reported it.
    """
    trials = Trial.objects.filter(experiment_id=experiment.id).order_by("id")
    if metric == experiment.searcher_metric:
        rows = trials.values_list("hparams", "best_validation")
        return [(h, v) for h, v in rows if v is not None and math.isfinite(v)]
    known: set[str] = set()
    out = []
    for hparams, summary in trials.values_list("hparams", "summary_metrics"):
        validation = (summary or {}).get("validation") or {}
        known.update(validation)
        value = (validation.get(metric) or {}).get("last")
        if isinstance(value, int | float) and _is_number(value) and math.isfinite(value):
            out.append((hparams, float(value)))
    if metric not in known:
        names = sorted(known | {experiment.searcher_metric})
        shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        raise InvalidInput(
            {"metric": [f"No trial of experiment {experiment.id} reported it; known: {shown}."]}
        )
    return out


def _feature(column: list[Any]) -> tuple[str, np.ndarray]:
    """``("numeric" | "categorical", float column)``: numbers as they are (missing = NaN, which
    the forest's trees route on their own), text and booleans ordinal-encoded in sorted order."""
    present = [v for v in column if v is not None]
    if present and all(_is_number(v) for v in present):
        values = [float(v) if v is not None else math.nan for v in column]
        return "numeric", np.clip(np.array(values, dtype=float), -_FLOAT32_MAX, _FLOAT32_MAX)
    texts = [MISSING if v is None else str(v) for v in column]
    codes = {text: i for i, text in enumerate(sorted(set(texts)))}
    return "categorical", np.array([codes[t] for t in texts], dtype=float)


def _correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r over the trials that have ``x``; None when either side is constant."""
    kept = ~np.isnan(x)
    x, y = x[kept], y[kept]
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def hparam_importance(experiment: Experiment, metric: str | None = None) -> dict[str, Any]:
    """Importance of each varying hyperparameter of ``experiment`` for ``metric``.

    ``metric`` defaults to the searcher metric. Returns ``{"experiment_id", "metric",
    "trials" (how many trials had a value and were used), "method": "random_forest",
    "hparams": [{"name" (dotted for nested hparams), "type": "numeric" | "categorical",
    "importance" (>= 0; they sum to 1, or are all 0 when the metric does not vary),
    "correlation" (Pearson's r with the metric, numeric hparams only, else None)}]}``, most
    important first; ``hparams`` is empty when no hyperparameter varies between those trials.
    The answer is cached (Django's default cache, ``CACHE_SECONDS``) under a hash of the trials'
    hyperparameters and values, so a new or changed value is a new fit.

    Raises InvalidInput (400, field ``metric``) for a metric no trial reported, and
    NotEnoughTrials (409) with fewer than ``MIN_TRIALS`` trials having a value.
    """
    metric = metric or experiment.searcher_metric
    rows = _metric_values(experiment, metric)
    if len(rows) < MIN_TRIALS:
        raise NotEnoughTrials(
            f"Hyperparameter importance needs at least {MIN_TRIALS} trials with a value of "
            f"{metric}; experiment {experiment.id} has {len(rows)}.",
            {"metric": [f"{len(rows)} of the required {MIN_TRIALS} trials have a value."]},
        )
    key = (
        "hparam-importance:"
        + hashlib.sha256(
            json.dumps([experiment.id, metric, rows], sort_keys=True, default=str).encode()
        ).hexdigest()
    )
    cached = cache.get(key)
    if cached is not None:
        return cached
    result = _fit(experiment, metric, rows)
    cache.set(key, result, CACHE_SECONDS)
    return result


def _fit(
    experiment: Experiment, metric: str, rows: list[tuple[dict[str, Any], float]]
) -> dict[str, Any]:
    """The answer of ``hparam_importance`` for these ``(hparams, value)`` rows."""
    from sklearn.ensemble import RandomForestRegressor  # a second to import: only when asked

    flat = [dict(flatten_hparams(hparams)) for hparams, _ in rows]
    names = sorted({name for pairs in flat for name in pairs})
    y = np.array([value for _, value in rows], dtype=float)
    features = []
    for name in names:
        column = [pairs.get(name) for pairs in flat]
        if len({repr(v) for v in column}) > 1:  # a constant hparam explains nothing
            features.append((name, *_feature(column)))
    result: dict[str, Any] = {
        "experiment_id": experiment.id,
        "metric": metric,
        "trials": len(rows),
        "method": "random_forest",
        "hparams": [],
    }
    if not features:
        return result
    x = np.column_stack([column for _, _, column in features])
    forest = RandomForestRegressor(n_estimators=N_ESTIMATORS, random_state=SEED, n_jobs=1)
    forest.fit(x, y)
    entries = [
        {
            "name": name,
            "type": kind,
            "importance": float(importance),
            "correlation": _correlation(column, y) if kind == "numeric" else None,
        }
        for (name, kind, column), importance in zip(
            features, forest.feature_importances_, strict=True
        )
    ]
    result["hparams"] = sorted(entries, key=lambda e: (-e["importance"], e["name"]))
    return result
