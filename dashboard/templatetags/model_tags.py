"""Template helpers of the "Register as model" form on the trial page's checkpoints."""

from __future__ import annotations

from typing import Any

from django import template

from registry.authz import changeable
from registry.models import RegisteredModel

register = template.Library()

# The name list only suggests; any valid name can still be typed (a new model is then created).
MAX_SUGGESTED_MODELS = 500


@register.simple_tag
def registrable_model_names(user: Any) -> list[str]:
    """Names of the non-archived models ``user`` may register versions into (those it may
    change: ``registry.authz.changeable``), by name, at most ``MAX_SUGGESTED_MODELS``. One
    query (and the user's roles, usually read already by the page)."""
    qs = changeable(RegisteredModel.objects, user).filter(archived=False)
    return list(qs.order_by("name").values_list("name", flat=True)[:MAX_SUGGESTED_MODELS])
