"""Metric series over REST: query parameters shared by the trial and experiment endpoints, and
the streamed CSV export."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

import orjson
from django.http import Http404, HttpResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.views import APIView

from registry import metrics
from registry.api.params import (
    TEXT_PATTERN,
    bool_param,
    int_param,
    int_query_parameter,
    optional_int_param,
    single_value,
    text_list_param,
    text_param,
)
from registry.authz import scoped
from registry.errors import InvalidInput
from registry.models import Trial

MAX_POINTS_LIMIT = 1_000_000
STEP_MAX = 2**62
SERIES_PARAMETERS = [
    OpenApiParameter(
        "group",
        {"type": "string", "pattern": TEXT_PATTERN},
        description="Only this group (training, validation, ...).",
    ),
    OpenApiParameter(
        "name",
        {"type": "array", "items": {"type": "string", "pattern": TEXT_PATTERN}},
        description="Only these metric names (repeatable).",
    ),
    OpenApiParameter(
        "max_points",
        {"type": "integer", "minimum": 0, "maximum": MAX_POINTS_LIMIT, "not": {"enum": [1, 2, 3]}},
        description="Points per series (>= 4), 0 for all.",
    ),
    int_query_parameter("x_min", lo=0, hi=STEP_MAX, description="First step of the window."),
    int_query_parameter("x_max", lo=0, hi=STEP_MAX, description="Last step of the window."),
    int_query_parameter("after_step", lo=-1, hi=STEP_MAX, description="Only steps after this."),
    OpenApiParameter(
        "x_axis", str, enum=[a.value for a in metrics.XAxis], description="Extra x values."
    ),
    OpenApiParameter(
        "band",
        str,
        enum=["true", "false"],
        description="true: a downsampled series is one point per step range (its last) with "
        "the range's extremes in min / max, for a line with a band.",
    ),
]


def series_params(request, *, default_max_points: int) -> dict[str, Any]:
    """The keyword arguments of ``registry.metrics.read_*series`` from a GET's query.

    Raises:
        InvalidInput: naming the parameter (not an integer, out of range, ``x_min > x_max``,
            an unknown ``x_axis``).
    """
    max_points = int_param(request, "max_points", default_max_points, lo=0, hi=MAX_POINTS_LIMIT)
    if 0 < max_points < 4:
        raise InvalidInput({"max_points": ["Must be 0 (all points) or at least 4."]})
    x_min = optional_int_param(request, "x_min", lo=0, hi=STEP_MAX)
    x_max = optional_int_param(request, "x_max", lo=0, hi=STEP_MAX)
    if x_min is not None and x_max is not None and x_min > x_max:
        raise InvalidInput({"x_max": [f"Must be at least x_min ({x_min})."]})
    after_step = optional_int_param(request, "after_step", lo=-1, hi=STEP_MAX)
    raw_axis = single_value(request, "x_axis")
    raw_axis = metrics.XAxis.BATCHES.value if raw_axis is None else raw_axis
    try:
        x_axis = metrics.XAxis(raw_axis)
    except ValueError:
        allowed = ", ".join(a.value for a in metrics.XAxis)
        raise InvalidInput({"x_axis": [f"Must be one of: {allowed}."]}) from None
    band = bool_param(request, "band") or False
    return {
        "group": text_param(request, "group"),
        "names": text_list_param(request, "name"),
        "max_points": max_points,
        "window": metrics.Window(x_min=x_min, x_max=x_max, after_step=after_step),
        "x_axis": x_axis,
        "band": band,
    }


def series_response(body: dict[str, Any]) -> HttpResponse:
    """``body`` (a metric read's answer: dicts, lists, ints, floats, None, text) as JSON.

    orjson, not DRF's renderer: the overview of 1,000 trials is ~3 MB of floats, which
    ``json.dumps`` takes ~120 ms to write and orjson ~10 ms (docs/performance.md).
    """
    return HttpResponse(orjson.dumps(body), content_type="application/json")


class _Echo:
    """A write-only file for ``csv.writer`` that hands each line back (Django's CSV recipe)."""

    def write(self, value: str) -> str:
        return value


CSV_HEADER = ("group", "name", "steps_completed", "value", "epoch", "reported_at", "run_id")


def _csv_lines(trial_id: int, group: str | None, names: list[str]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_HEADER)
    for row_group, name, step, value, epoch, reported_at, run_id in metrics.stream_rows(
        trial_id, group, names
    ):
        cell = value if isinstance(value, int | float | str) else json.dumps(value)
        stamp = reported_at.isoformat() if reported_at else ""
        yield writer.writerow(
            (row_group, name, step, cell, "" if epoch is None else epoch, stamp, run_id)
        )


class TrialMetricsCSV(APIView):
    """``GET trials/{id}/metrics.csv``: every stored point, streamed (users only)."""

    @extend_schema(
        parameters=SERIES_PARAMETERS[:2],
        responses={(200, "text/csv"): str},
        operation_id="trial_metrics_csv",
    )
    def get(self, request, pk: int):
        """One CSV line per point: ``group,name,steps_completed,value,epoch,reported_at,run_id``.

        Streamed from a server-side cursor, so memory stays flat for any series length. Every
        parameter is checked before the first byte is sent: once the 200 is out, an error can
        only cut the stream.
        """
        group, names = text_param(request, "group"), text_list_param(request, "name")
        if not scoped(Trial.objects.filter(id=pk), request.user).exists():
            raise Http404("No Trial matches the given query.")
        response = StreamingHttpResponse(_csv_lines(pk, group, names), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="trial-{pk}-metrics.csv"'
        return response
