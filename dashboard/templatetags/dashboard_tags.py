"""Template filters for the dashboard pages."""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def metric(value: Any) -> str:
    """A metric value with 6 significant digits (``0.8``, ``0.912345``, ``1.2e-07``); "–" if none.

    Matches the page script's ``toPrecision(6)`` so live updates do not change the format.
    """
    if value is None or isinstance(value, bool):
        return "\u2013"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return f"{value:.6g}"
    return str(value)


@register.simple_tag
def hparam_value(trial: Any, key: str) -> Any:
    """The value of flattened hyperparameter ``key`` (``optimizer.lr``) of ``trial``, or None.

    Reads ``trial.hparams_flat`` (set by ``dashboard.selectors.experiment_trials``).
    """
    for name, value in getattr(trial, "hparams_flat", ()):
        if name == key:
            return value
    return None
