"""Template helpers of the experiment page's trials table, the charts' shared legend
(``static/js/trials_legend.js``)."""

from __future__ import annotations

import json
import math
from typing import Any

from django import template

register = template.Library()


def _plain(value: Any) -> Any:
    """A JSON-safe hyperparameter value: numbers and text as they are, non-finite floats and
    anything else (lists, empty dicts) as text."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return json.dumps(value, default=str)


@register.filter
def legend_hparams(trial: Any) -> str:
    """The trial's flattened hyperparameters as a JSON object (``{"optimizer.lr": 0.1}``), read
    by the legend's search and colour-by; from ``trial.hparams_flat`` (set by
    ``dashboard.selectors.experiment_trials``)."""
    pairs = getattr(trial, "hparams_flat", ())
    return json.dumps({key: _plain(value) for key, value in pairs}, separators=(",", ":"))
