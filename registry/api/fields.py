"""Serializer fields shared by the REST API's input serializers."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from registry import metrics
from registry.jsonsafe import check_json_size, json_storage_problem


class StorableDictField(serializers.DictField):
    """A ``DictField`` whose value can be stored as JSON on every database
    (``json_storage_problem``); the 400 names the field.

    ``max_bytes_setting``: the name of the setting that bounds the value's size as JSON; a
    larger value is a 413 naming the field and the limit (``check_json_size``).
    """

    def __init__(self, *args: Any, max_bytes_setting: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_bytes_setting = max_bytes_setting

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        problem = json_storage_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        if self.max_bytes_setting is not None:
            check_json_size(value, field=self.field_name or "input", setting=self.max_bytes_setting)
        return value


_SUMMARY_SCHEMA = {
    "type": "object",
    "description": "{group: {name: {last, last_step, min, max, count}}}",
    "additionalProperties": {"type": "object", "additionalProperties": {"type": "object"}},
}


@extend_schema_field(_SUMMARY_SCHEMA)
class SummaryMetricsField(serializers.Field):
    """A trial's ``summary_metrics`` with at most ``metrics.SUMMARY_SERIES_IN_TRIAL`` series,
    the searcher metric's first (``metrics.bounded_summary``); read-only, ``source="*"``."""

    def to_representation(self, value: Any) -> dict[str, Any]:
        # The experiment is at hand without a query: select_related by the trial routes, the
        # related manager's own instance in an experiment's trial list.
        searcher = (value.experiment.config or {}).get("searcher") or {}
        metric = searcher.get("metric") if isinstance(searcher, dict) else None
        return metrics.bounded_summary(
            value.summary_metrics, metric if isinstance(metric, str) else None
        )


@extend_schema_field({"type": "integer", "minimum": 0})
class SummaryMetricsCountField(serializers.Field):
    """How many series a trial's whole ``summary_metrics`` holds (``source="summary_metrics"``)."""

    def to_representation(self, value: Any) -> int:
        return metrics.summary_count(value)


@extend_schema_field(
    {
        "anyOf": [
            {"type": "object", "additionalProperties": True},
            {"type": "string", "pattern": r"^[^\x00]*$"},
        ],
        "description": "The experiment config (docs/config.md): a mapping, or YAML text of one.",
    }
)
class ExperimentConfigField(serializers.JSONField):
    """An experiment config: a JSON object or YAML text (never null, a number or a list)."""


class CheckpointFilesField(serializers.DictField):
    """``{relative path: size in bytes}``; the schema's ``maxProperties`` is
    ``HEADWAY_MAX_CHECKPOINT_FILES`` (``registry.api.schema`` reads ``max_properties``)."""

    @property
    def max_properties(self) -> int:
        return settings.HEADWAY_MAX_CHECKPOINT_FILES


class StrictUUIDField(serializers.UUIDField):
    """A UUID given as a JSON string only. DRF's ``UUIDField`` also takes an integer (the
    UUID's 128-bit value), and ``false`` is an integer to Python: a checkpoint posted with
    ``"uuid": false`` was stored as ``00000000-...``, where the schema says string."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number only: DRF's ``FloatField`` also takes ``true``/``false`` and numeric
    strings, which the schema (``number``) does not allow."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)
