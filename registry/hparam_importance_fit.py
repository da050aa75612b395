"""The random forest behind hyperparameter importance, bounded in features, rows and time.

The method is the one Weights & Biases' "Parameter importance" panel uses
(https://docs.wandb.ai/guides/app/features/panels/parameter-importance/): fit a random forest
with the hyperparameters as features and the metric as the target, and report each feature's
importance (scikit-learn's ``RandomForestRegressor.feature_importances_``, the mean decrease in
impurity of Breiman, "Random Forests", Machine Learning 45, 2001), beside the linear (Pearson)
correlation of each numeric hyperparameter with the metric.

Runs in the master's Celery worker (``registry.hparam_importance.run_fit``), never in a request.
Its cost grows with trials x hyperparameters x trees, so each is bounded: at most
``MAX_HPARAMS`` hyperparameters (those most associated with the metric on their own), at most
``MAX_SAMPLES`` trials drawn for each tree, ``N_ESTIMATORS`` trees, and a deadline checked
between batches of trees.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from headway.expconf import flatten_hparams

# Enough trees for stable importances on searches of up to a few thousand trials; fixed seed so
# that the same trials always give the same answer.
N_ESTIMATORS = 100
SEED = 0
# Trees are grown this many at a time; the deadline is checked between batches (the master's
# worker runs a thread pool, where Celery's time limits do not apply).
TREES_PER_BATCH = 20
# Features fitted at most: 1,000 trials x 100 hyperparameters is a ~3 s fit (docs/performance.md).
MAX_HPARAMS = 100
# Bootstrap sample of each tree at most: beyond it a tree's cost grows, its importances barely move.
MAX_SAMPLES = 2000
# Categorical value of a trial that lacks a hyperparameter (conditional or nested hparams).
MISSING = "(none)"
# float32 is what the forest's trees compare in: larger magnitudes would become infinite.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class FitTimeout(Exception):
    """The forest was not grown within the fit's deadline."""


def is_number(value: Any) -> bool:
    """A number a float holds (booleans are categories; an integer past float range is text)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _feature(column: list[Any]) -> tuple[str, np.ndarray]:
    """``("numeric" | "categorical", float column)``: numbers as they are (missing = NaN, which
    the forest's trees route on their own), text and booleans ordinal-encoded in sorted order."""
    present = [v for v in column if v is not None]
    if present and all(is_number(v) for v in present):
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
    with np.errstate(all="ignore"):  # huge magnitudes overflow to inf: no linear relation
        r = float(np.corrcoef(x, y)[0, 1])
    return r if math.isfinite(r) else None


def _correlation_ratio(codes: np.ndarray, y: np.ndarray) -> float:
    """Correlation ratio (eta, 0..1) of a categorical column with ``y``: the share of ``y``'s
    spread that the categories' means explain."""
    total = float(np.sum((y - y.mean()) ** 2))
    if total == 0:
        return 0.0
    between = sum(
        int(np.sum(codes == c)) * float(y[codes == c].mean() - y.mean()) ** 2
        for c in np.unique(codes)
    )
    return math.sqrt(min(1.0, between / total))


def _association(kind: str, column: np.ndarray, y: np.ndarray) -> float:
    """How much a hyperparameter alone tells about ``y`` (0..1): |Pearson's r| for a numeric
    one, the correlation ratio for a categorical one. Ranks features when there are too many."""
    if kind == "numeric":
        return abs(_correlation(column, y) or 0.0)
    return _correlation_ratio(column, y)


def fit(rows: list[tuple[dict[str, Any], float]], *, deadline: float) -> dict[str, Any]:
    """Importance of each varying hyperparameter in ``rows`` (``(hparams, value)`` per trial).

    Returns ``{"hparams_varying": int, "hparams": [{"name", "type", "importance",
    "correlation"}]}`` (see ``registry.hparam_importance.run_fit``): when more than
    ``MAX_HPARAMS`` hyperparameters vary, only the ``MAX_HPARAMS`` most associated with the
    value on their own (``_association``; ties by name) are fitted and listed. Raises
    FitTimeout when ``time.monotonic()`` passes ``deadline`` before the last tree is grown.
    """
    from sklearn.ensemble import RandomForestRegressor  # a second to import: only when asked

    flat = [dict(flatten_hparams(hparams)) for hparams, _ in rows]
    names = sorted({name for pairs in flat for name in pairs})
    y = np.array([value for _, value in rows], dtype=float)
    features = []
    for name in names:
        column = [pairs.get(name) for pairs in flat]
        if len({repr(v) for v in column}) > 1:  # a constant hparam explains nothing
            features.append((name, *_feature(column)))
    varying = len(features)
    if varying > MAX_HPARAMS:
        ranked = sorted(features, key=lambda f: (-_association(f[1], f[2], y), f[0]))
        features = sorted(ranked[:MAX_HPARAMS], key=lambda f: f[0])
    result: dict[str, Any] = {"hparams_varying": varying, "hparams": []}
    if not features:
        return result
    x = np.column_stack([column for _, _, column in features])
    forest = RandomForestRegressor(
        n_estimators=0,
        random_state=SEED,
        n_jobs=1,
        warm_start=True,  # each fit() below adds trees; same trees as one fit of all of them
        max_samples=MAX_SAMPLES if len(y) > MAX_SAMPLES else None,
    )
    while forest.n_estimators < N_ESTIMATORS:
        if time.monotonic() > deadline:
            raise FitTimeout(f"{forest.n_estimators} of {N_ESTIMATORS} trees grown")
        forest.n_estimators = min(N_ESTIMATORS, forest.n_estimators + TREES_PER_BATCH)
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
