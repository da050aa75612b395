"""``?filter=`` and ``?order_by=`` of the experiment and trial lists (``registry.search``;
docs/search.md), for the views that list them."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter

from registry.api.params import text_param
from registry.search import Target, filter_queryset, order_queryset

FILTER_PARAMETER = OpenApiParameter(
    "filter",
    str,
    description=(
        "Only what matches this filter (docs/search.md), e.g. "
        '`validation_accuracy > 0.95 and hparams.optimizer = "adam"`; a filter that does not '
        "parse, an unknown field, or a value a field does not take is a 400 naming `filter`."
    ),
)
ORDER_BY_PARAMETER = OpenApiParameter(
    "order_by",
    str,
    description=(
        "Comma-separated fields to sort by, `-` first for descending (e.g. "
        "`-validation_accuracy,hparams.lr`); missing values last, then by id."
    ),
)
TRIAL_SEARCH_PARAMETERS = [FILTER_PARAMETER, ORDER_BY_PARAMETER]


def searched(request, queryset: QuerySet, target: Target) -> QuerySet:
    """``queryset`` narrowed by the request's ``filter`` and, for trials, sorted by its
    ``order_by``.

    Raises:
        InvalidInput: 400 naming ``filter`` or ``order_by`` (``registry.search``).
    """
    queryset = filter_queryset(queryset, text_param(request, "filter"), target)
    if target is Target.TRIAL:
        queryset = order_queryset(queryset, text_param(request, "order_by"))
    return queryset
