"""``?filter=`` and ``?order_by=`` of the experiment and trial lists (``registry.search``;
docs/search.md), for the views that list them."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework.response import Response

from registry.api.params import text_param
from registry.api.serializers import TrialSerializer
from registry.search import Target, filter_queryset, order_queryset
from registry.search.paging import rows_in_order, sorted_ids

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
        "`-validation_accuracy,hparams.lr`; experiments: their own fields, e.g. "
        "`-best_validation,name`); missing values last, then by id."
    ),
)
TRIAL_SEARCH_PARAMETERS = [FILTER_PARAMETER, ORDER_BY_PARAMETER]


def searched(request, queryset: QuerySet, target: Target) -> QuerySet:
    """``queryset`` narrowed by the request's ``filter`` and sorted by its ``order_by``.

    Raises:
        InvalidInput: 400 naming ``filter`` or ``order_by`` (``registry.search``).
    """
    queryset = filter_queryset(queryset, text_param(request, "filter"), target)
    return order_queryset(queryset, text_param(request, "order_by"), target)


def trial_page(view, trials: QuerySet) -> Response:
    """The paginated answer of ``trials`` (filtered and sorted by ``searched``): the page's ids
    first, then its rows. Counting and sorting read only ids, the side table and the narrow
    ``trial_list_cover`` index; the wide rows (hparams, summaries: ~1.3 kB each) are read for
    the page alone, not for every match before the sort; a sort by a metric or hyperparameter
    reads its top page from the side table's index (``registry.search.paging``;
    bench/run_filter.py)."""
    ids = list(view.paginate_queryset(sorted_ids(trials)) or [])
    rows = rows_in_order(trials, ids)
    return view.get_paginated_response(TrialSerializer(rows, many=True).data)
