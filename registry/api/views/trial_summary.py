"""``GET /api/v1/trials/{id}/summary-metrics/``: every series aggregate of a trial, a page at a
time. The trial answer embeds at most ``metrics.SUMMARY_SERIES_IN_TRIAL`` of them
(``summary_metrics``, with ``summary_metrics_count``); this route reaches the rest."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action

from registry import metrics
from registry.api.pagination import BoundedLimitOffsetPagination


class SummarySeriesSerializer(serializers.Serializer):
    """One series' aggregate: ``Trial.summary_metrics[group][name]`` with its group and name."""

    group = serializers.CharField()
    name = serializers.CharField()
    last = serializers.JSONField(allow_null=True)
    last_step = serializers.IntegerField(allow_null=True)
    min = serializers.JSONField(allow_null=True)
    max = serializers.JSONField(allow_null=True)
    count = serializers.IntegerField(allow_null=True)


class TrialSummaryMixin:
    """``summary_metrics``: the trial's series aggregates sorted by group then name, paged with
    ``?limit=`` (default ``PAGE_SIZE``, at most 1000) and ``?offset=``; who may read the trial
    may read them (its own run token too)."""

    @extend_schema(responses=SummarySeriesSerializer(many=True))
    @action(
        detail=True,
        methods=["get"],
        url_path="summary-metrics",
        url_name="summary-metrics",
        pagination_class=BoundedLimitOffsetPagination,
    )
    def summary_metrics(self, request, pk=None):
        trial = self.get_object()
        rows = [
            {
                "group": group,
                "name": name,
                **(entry if isinstance(entry, dict) else {"last": entry}),
            }
            for group, name, entry in metrics.summary_series(trial.summary_metrics)
        ]
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(SummarySeriesSerializer(page, many=True).data)
