"""Checkpoint lists of an experiment or a trial: ``?order_by=`` and ``?state=``, with metadata.

Each row carries the metrics reported at its step and its ``best``/``latest`` flags
(``registry.checkpoints.selectors``) in a fixed number of queries per page.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter

from registry.api.params import single_value
from registry.api.serializers import CheckpointSerializer
from registry.checkpoints import attach_metadata, with_metrics
from registry.checkpoints.selectors import searcher_value
from registry.errors import InvalidInput
from registry.models import Checkpoint, CheckpointState

ORDERINGS = ("steps_completed", "-steps_completed", "searcher_metric", "-searcher_metric")

CHECKPOINT_LIST_PARAMETERS = [
    OpenApiParameter(
        "order_by",
        str,
        enum=ORDERINGS,
        description="Sort key (default: newest first for an experiment, highest "
        "``steps_completed`` first for a trial). ``searcher_metric`` sorts by the "
        "experiment's searcher metric of the validation at each checkpoint's step, ascending "
        "(``-`` descending); checkpoints without one come last either way.",
    ),
    OpenApiParameter("state", str, enum=CheckpointState.values, description="Only this state."),
]


def _parse(request) -> tuple[str | None, str | None]:
    # An empty value is a 400 too (not silently the default).
    order_by = single_value(request, "order_by")
    if order_by is not None and order_by not in ORDERINGS:
        raise InvalidInput({"order_by": [f"Unknown ordering; allowed: {', '.join(ORDERINGS)}."]})
    state = single_value(request, "state")
    if state is not None and state not in CheckpointState.values:
        allowed = ", ".join(CheckpointState.values)
        raise InvalidInput({"state": [f"Unknown state; allowed: {allowed}."]})
    return order_by, state


def checkpoint_list_response(
    view, queryset: QuerySet[Checkpoint], default_order: tuple[str, ...] = ("-created_at",)
):
    """The paginated response of ``queryset`` filtered and ordered by the request's
    ``state`` / ``order_by`` (400 naming the parameter when invalid), else by
    ``default_order``."""
    order_by, state = _parse(view.request)
    if state is not None:
        queryset = queryset.filter(state=state)
    queryset = with_metrics(queryset)
    rows: QuerySet[Checkpoint] | list[Checkpoint]
    if order_by in ("searcher_metric", "-searcher_metric"):
        # The metric is a key of a JSON report whose values may be "NaN" strings: rank in
        # Python (one query for all rows) instead of casting in SQL.
        rows = list(queryset)
        valued = [(searcher_value(c, c.trial.experiment), c) for c in rows]
        ranked = sorted(
            (pair for pair in valued if pair[0] is not None and pair[0] == pair[0]),
            key=lambda pair: (pair[0], pair[1].steps_completed),
            reverse=order_by.startswith("-"),
        )
        unranked = [c for value, c in valued if value is None or value != value]
        rows = [c for _, c in ranked] + unranked
    elif order_by is not None:
        rows = queryset.order_by(order_by, "-created_at")
    else:
        rows = queryset.order_by(*default_order)
    page = view.paginate_queryset(rows)
    attach_metadata(page)
    return view.get_paginated_response(CheckpointSerializer(page, many=True).data)
