"""Serializers of what a trial process reports to the registry over REST: its log lines (and
their pages), progress, searcher operations completed, an early exit, and a preemption
acknowledged."""

from __future__ import annotations

from typing import ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from headway.early_exit import EarlyExitReason
from headway.metric_values import chartable, decode_number
from registry.api.fields import StrictFloatField
from registry.api.serializers import INT64_MAX, RUN_ID_MAX
from registry.models import TrialLog


class TrialLogSerializer(serializers.ModelSerializer):
    class Meta:
        model = TrialLog
        fields: ClassVar[list[str]] = ["id", "run_id", "timestamp", "message"]
        read_only_fields = fields


class TrialLogPageSerializer(serializers.Serializer):
    """``GET trials/{id}/logs/``: lines after the ``after`` cursor, the next cursor and the
    trial's state (a tail stops polling once the trial ended)."""

    results = TrialLogSerializer(many=True)
    last_id = serializers.IntegerField()
    trial_state = serializers.CharField()


class ProgressSerializer(serializers.Serializer):
    progress = StrictFloatField(min_value=0.0, max_value=1.0)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "number"},
            {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]},
        ]
    }
)
class SearcherMetricField(serializers.Field):
    """A finite number, or ``"NaN"``/``"Infinity"``/``"-Infinity"`` (kept as no value)."""

    def to_internal_value(self, data):
        number = decode_number(data)
        if number is None:
            raise serializers.ValidationError("Must be a number, or NaN/Infinity/-Infinity.")
        return chartable(number)

    def to_representation(self, value):
        return value


class SearcherCompletedSerializer(serializers.Serializer):
    length = serializers.IntegerField(min_value=0, max_value=INT64_MAX)
    metric = SearcherMetricField(allow_null=True)


class EarlyExitSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=[reason.value for reason in EarlyExitReason])


class PreemptAckSerializer(serializers.Serializer):
    run_id = serializers.IntegerField(min_value=1, max_value=RUN_ID_MAX)
