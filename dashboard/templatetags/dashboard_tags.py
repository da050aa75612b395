"""Template filters for the dashboard pages."""

from __future__ import annotations

from typing import Any

from django import template

from dashboard.templatetags.numbers import sig4

register = template.Library()


@register.filter
def metric(value: Any) -> str:
    """The ``sig4`` filter under its older name (``dashboard.templatetags.numbers``): 4
    significant digits, exact value on hover and copy; "\u2013" if none."""
    return sig4(value)


@register.simple_tag
def hparam_value(trial: Any, key: str) -> Any:
    """The value of flattened hyperparameter ``key`` (``optimizer.lr``) of ``trial``, or None.

    Reads ``trial.hparams_flat`` (set by ``dashboard.selectors.experiment_trials``).
    """
    for name, value in getattr(trial, "hparams_flat", ()):
        if name == key:
            return value
    return None
