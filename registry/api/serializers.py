"""Output serializers (read shapes) and input serializers (write shapes) for the REST API."""

from __future__ import annotations

import base64
import binascii
from typing import Any, ClassVar

from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.login_forms import username_max_length
from headway.expconf import ConfigError, Length
from headway.storage._base import check_relpath
from registry.api.fields import (
    CheckpointFilesField,
    ExperimentConfigField,
    StorableDictField,
    StrictUUIDField,
    SummaryMetricsCountField,
    SummaryMetricsField,
)
from registry.api.model_serializers import (
    StrictCharField,
    StrictSerializer,
    labels_field,
    multiline_text_field,
)
from registry.checkpoints import attach_metadata
from registry.models import Checkpoint, Experiment, Trial, TrialRun, WorkerHost
from registry.user_text import DESCRIPTION_MAX, LINE_PATTERN, NAME_MAX, NOTES_MAX


class ExperimentSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    num_trials = serializers.IntegerField(read_only=True)
    searcher_metric = serializers.CharField(read_only=True)
    searcher_name = serializers.CharField(source="conf.searcher.name", read_only=True)
    source_trial_id = serializers.IntegerField(read_only=True, allow_null=True)
    # Annotated by the viewset (registry.scheduling.experiment_scheduling_message): why one of
    # its trials waits for a host; "" when none does.
    scheduling_message = serializers.CharField(read_only=True, default="")
    # Where it lives (registry.workspaces); list querysets join ``project__workspace``.
    project_id = serializers.IntegerField(read_only=True)
    project_name = serializers.CharField(source="project.name", read_only=True)
    workspace_id = serializers.IntegerField(source="project.workspace_id", read_only=True)
    workspace_name = serializers.CharField(source="project.workspace.name", read_only=True)

    class Meta:
        model = Experiment
        fields: ClassVar[list[str]] = [
            "id",
            "name",
            "description",
            "labels",
            "notes",
            "state",
            "archived",
            "owner",
            "config",
            "num_trials",
            "progress",
            "best_validation",
            "searcher_metric",
            "searcher_name",
            "source_trial_id",
            "model_definition_size",
            "scheduling_message",
            "delete_error",
            "created_at",
            "ended_at",
            "project_id",
            "project_name",
            "workspace_id",
            "workspace_name",
        ]
        read_only_fields = fields


class ExperimentPatchSerializer(StrictSerializer):
    """``PATCH experiments/{id}/``: any of ``name``, ``description``, ``labels`` (replaces the
    list), ``notes`` (Markdown), checked by ``registry.user_text``'s rules (Determined's
    ``PatchExperiment``)."""

    name = StrictCharField(
        required=False,
        max_length=NAME_MAX,
        validators=[
            RegexValidator(LINE_PATTERN, message="Must be one line with no control characters.")
        ],
    )
    description = multiline_text_field(DESCRIPTION_MAX)
    labels = labels_field()
    notes = multiline_text_field(NOTES_MAX)


class TrialPatchSerializer(StrictSerializer):
    """``PATCH trials/{id}/``: ``notes`` (Markdown)."""

    notes = multiline_text_field(NOTES_MAX)


# Standard base64 with its padding, as base64.b64decode(validate=True) takes it.
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


class ExperimentCreateSerializer(StrictSerializer):
    """``{"config": <object or YAML text>, "model_definition": <base64 tar.gz>}``."""

    config = ExperimentConfigField()
    model_definition = StrictCharField(
        trim_whitespace=False,
        validators=[RegexValidator(BASE64_PATTERN, message="Must be a base64-encoded tar.gz.")],
    )

    def validate_config(self, value):
        if not isinstance(value, dict | str):
            raise serializers.ValidationError("Must be a mapping or a YAML string.")
        return value

    def validate_model_definition(self, value: str) -> bytes:
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError("Must be a base64-encoded tar.gz.") from None


class TrialSerializer(serializers.ModelSerializer):
    """A trial. ``summary_metrics`` embeds at most ``metrics.SUMMARY_SERIES_IN_TRIAL`` series
    (the searcher metric's first); ``summary_metrics_count`` counts them all, and
    ``GET trials/{id}/summary-metrics/`` pages every one (``registry.metrics._summary``)."""

    experiment_id = serializers.IntegerField(read_only=True)
    # Annotated by ``Trial.objects.with_run_state()`` (one query for a whole page of trials).
    run_state = serializers.CharField(read_only=True, allow_null=True)
    summary_metrics = SummaryMetricsField(source="*", read_only=True)
    summary_metrics_count = SummaryMetricsCountField(source="summary_metrics", read_only=True)

    class Meta:
        model = Trial
        fields: ClassVar[list[str]] = [
            "id",
            "experiment_id",
            "state",
            "run_state",
            "run_id",
            "restarts",
            "hparams",
            "seed",
            "steps_completed",
            "progress",
            "best_validation",
            "latest_checkpoint",
            "warm_start_checkpoint",
            "summary_metrics",
            "summary_metrics_count",
            "request_id",
            "searcher_length",
            "searcher_completed_length",
            "searcher_closed",
            "early_exit",
            "scheduling_message",
            "notes",
            "labels",
            "created_at",
            "ended_at",
        ]
        read_only_fields = fields


class CheckpointSerializer(serializers.ModelSerializer):
    """A checkpoint with the metrics reported at its step (``registry.checkpoints.selectors``).

    ``validation_metrics``: the validation report at its ``steps_completed`` (null if none);
    ``training_metrics``: the latest training report at or before it (null if none);
    ``searcher_metric``: the searcher metric's value in ``validation_metrics``; ``best``: the
    best COMPLETED checkpoint of its trial by that metric; ``latest``: the trial's
    ``latest_checkpoint``. Lists attach these for a whole page at once (``attach_metadata``);
    a single checkpoint gets them here.
    """

    trial_id = serializers.IntegerField(read_only=True)
    experiment_id = serializers.IntegerField(source="trial.experiment_id", read_only=True)
    validation_metrics = serializers.SerializerMethodField()
    training_metrics = serializers.SerializerMethodField()
    searcher_metric = serializers.SerializerMethodField()
    best = serializers.SerializerMethodField()
    latest = serializers.SerializerMethodField()

    class Meta:
        model = Checkpoint
        fields: ClassVar[list[str]] = [
            "uuid",
            "trial_id",
            "experiment_id",
            "run_id",
            "steps_completed",
            "state",
            "resources",
            "metadata",
            "size",
            "storage",
            "created_at",
            "validation_metrics",
            "training_metrics",
            "searcher_metric",
            "best",
            "latest",
        ]
        read_only_fields = fields

    @staticmethod
    def _meta(obj: Checkpoint, name: str) -> Any:
        if not hasattr(obj, "best"):
            attach_metadata([obj])
        return getattr(obj, name)

    def get_validation_metrics(self, obj: Checkpoint) -> dict[str, Any] | None:
        return self._meta(obj, "validation_metrics")

    def get_training_metrics(self, obj: Checkpoint) -> dict[str, Any] | None:
        return self._meta(obj, "training_metrics")

    def get_searcher_metric(self, obj: Checkpoint) -> float | str | None:
        return self._meta(obj, "searcher_metric")

    def get_best(self, obj: Checkpoint) -> bool:
        return self._meta(obj, "best")

    def get_latest(self, obj: Checkpoint) -> bool:
        return self._meta(obj, "latest")


INT64_MAX = 2**63 - 1
# Run ids are 32-bit columns (PositiveIntegerField).
RUN_ID_MAX = 2**31 - 1
# A checkpoint's file path is part of an object key (S3 keys are at most 1,024 bytes) and is
# listed with the checkpoint in every answer that holds it.
MAX_CHECKPOINT_FILE_PATH_CHARS = 1024


class CheckpointRegisterSerializer(StrictSerializer):
    """``POST trials/{id}/checkpoints/``: only these fields; a body naming anything else (a
    ``storage``, ``host_path`` or ``bucket`` of one's choosing) is a 400 naming it: the registry
    decides where a checkpoint lives (the trial's own storage location)."""

    uuid = StrictUUIDField()
    # Stored in 64-bit columns: a larger number is a 400, not an overflow (500).
    steps_completed = serializers.IntegerField(min_value=0, max_value=INT64_MAX)
    run_id = serializers.IntegerField(
        min_value=0, max_value=RUN_ID_MAX, required=False, allow_null=True
    )
    resources = CheckpointFilesField(
        child=serializers.IntegerField(min_value=0, max_value=INT64_MAX)
    )
    metadata = StorableDictField(
        required=False,
        default=dict,
        max_bytes_setting="HEADWAY_MAX_CHECKPOINT_METADATA_BYTES",
        help_text="JSON object of at most HEADWAY_MAX_CHECKPOINT_METADATA_BYTES (64 KiB); 413 beyond.",
    )

    def validate_resources(self, value: dict[str, int]) -> dict[str, int]:
        """At most ``HEADWAY_MAX_CHECKPOINT_FILES`` files, each a safe canonical relative path
        (``headway.storage.check_relpath``: no ``..``, absolute, empty or NUL names) of at most
        ``MAX_CHECKPOINT_FILE_PATH_CHARS`` characters."""
        limit = settings.HEADWAY_MAX_CHECKPOINT_FILES
        if len(value) > limit:
            raise serializers.ValidationError(f"{len(value)} files; at most {limit}.")
        for name in value:
            if len(name) > MAX_CHECKPOINT_FILE_PATH_CHARS:
                raise serializers.ValidationError(
                    f"a file path of {len(name)} characters; at most "
                    f"{MAX_CHECKPOINT_FILE_PATH_CHARS} each."
                )
            try:
                check_relpath(name)
            except ValueError as exc:
                raise serializers.ValidationError(str(exc).replace("\x00", "\\x00")) from None
        if sum(value.values()) > INT64_MAX:
            # The checkpoint's size (their sum) is a 64-bit column.
            raise serializers.ValidationError(f"The sizes add up to more than {INT64_MAX} bytes.")
        return value


class LoginSerializer(serializers.Serializer):
    # Longer than the user model's column: a 400 naming it (the failed-login record
    # django-axes writes would not fit, and PostgreSQL refused it with a 500).
    username = serializers.CharField(max_length=username_max_length())
    password = serializers.CharField(trim_whitespace=False)


_POSITIVE = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}


@extend_schema_field(
    {
        "oneOf": [
            _POSITIVE,
            {
                "type": "object",
                "properties": {unit: _POSITIVE for unit in ("batches", "epochs", "records")},
                "additionalProperties": False,
                "minProperties": 1,
                "maxProperties": 1,
            },
            {
                "type": "object",
                "properties": {
                    "unit": {"type": "string", "enum": ["batches", "epochs", "records"]},
                    "value": _POSITIVE,
                },
                "required": ["unit", "value"],
                "additionalProperties": False,
            },
        ]
    }
)
class MaxLengthField(serializers.Field):
    """``max_length`` as a bare int (batches) or ``{"batches"|"epochs"|"records": N}``."""

    def to_internal_value(self, data):
        try:
            Length.parse(data, self.field_name or "max_length")
        except ConfigError as exc:
            raise serializers.ValidationError(next(iter(exc.errors.values()))) from None
        return data

    def to_representation(self, value):
        return value


class ContinueTrialSerializer(serializers.Serializer):
    checkpoint = StrictUUIDField(required=False, allow_null=True)
    max_length = MaxLengthField(required=False, allow_null=True)
    hparams = StorableDictField(required=False, allow_null=True)


class WorkerRunSerializer(serializers.ModelSerializer):
    """A trial run holding slots on a host (placed, starting or running)."""

    trial_id = serializers.IntegerField(read_only=True)
    experiment_id = serializers.IntegerField(source="trial.experiment_id", read_only=True)

    class Meta:
        model = TrialRun
        fields: ClassVar[list[str]] = [
            "trial_id",
            "experiment_id",
            "run_id",
            "state",
            "slots",
            "devices",
            "worker",
            "started_at",
        ]
        read_only_fields = fields


class WorkerHostSerializer(serializers.ModelSerializer):
    """A worker host with its slots, what holds them, and whether it is alive.

    Needs the queryset of ``registry.scheduling.host_list()`` (``slots_in_use`` annotated,
    ``active_runs`` prefetched).
    """

    slots_in_use = serializers.IntegerField(read_only=True)
    alive = serializers.BooleanField(read_only=True)
    runs = WorkerRunSerializer(source="active_runs", many=True, read_only=True)

    class Meta:
        model = WorkerHost
        fields: ClassVar[list[str]] = [
            "name",
            "pool",
            "queue",
            "slots",
            "slots_in_use",
            "devices",
            "gpu",
            "alive",
            "admin_state",
            "admin_reason",
            "started_at",
            "heartbeat_at",
            "runs",
        ]
        read_only_fields = fields
