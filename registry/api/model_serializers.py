"""Serializers of the model registry's REST API (``models/``, ``models/{name}/versions/``,
``models/{name}/aliases/``).

Input serializers refuse unknown keys (``StrictSerializer``): a misspelt field is a 400 naming
it, never silently dropped.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.validators import RegexValidator
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from registry.api.fields import StorableDictField, StrictUUIDField
from registry.errors import InvalidInput
from registry.model_registry import MODEL_NAME_MAX, MODEL_NAME_PATTERN, validate_model_name
from registry.models import Checkpoint, ModelAlias, ModelAliasEvent, ModelVersion, RegisteredModel
from registry.user_text import (
    DESCRIPTION_MAX,
    LABEL_MAX,
    LABEL_PATTERN,
    LABELS_MAX,
    MULTILINE_PATTERN,
)


class StrictSerializer(serializers.Serializer):
    """A serializer whose input may hold only its declared fields."""

    # The OpenAPI schema says so (additionalProperties: false; registry/api/schema.py).
    refuses_unknown_fields = True

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {key: [f"Unknown field; allowed: {', '.join(self.fields)}."] for key in unknown}
                )
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A ``CharField`` that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A ``BooleanField`` that takes only JSON ``true``/``false`` (not 0, 1, "yes")."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


def labels_field() -> serializers.ListField:
    """An optional list of labels, checked as ``registry.user_text.validate_labels`` checks
    them (the schema carries the rule): at most ``LABELS_MAX``, each 1-256 characters, no comma
    or control character."""
    label = StrictCharField(
        max_length=LABEL_MAX,
        allow_blank=False,
        validators=[
            RegexValidator(
                LABEL_PATTERN,
                message="A label must not be blank or contain a comma or control characters.",
            )
        ],
    )
    return serializers.ListField(child=label, required=False, max_length=LABELS_MAX)


def multiline_text_field(max_length: int, **kwargs: Any) -> StrictCharField:
    """Optional free text (description, comment, notes) of at most ``max_length`` characters,
    with no control characters but tabs and line breaks (``registry.user_text.validate_text``)."""
    return StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=max_length,
        validators=[
            RegexValidator(
                MULTILINE_PATTERN, message="Must not contain control characters but line breaks."
            )
        ],
        **kwargs,
    )


# A workspace id fits PostgreSQL's bigint; a larger one is a 400, not a database error.
_ID_MAX = 2**63 - 1


# The schema of a workspace reference: an id, or a name without NUL.
WORKSPACE_REF_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": _ID_MAX},
        {"type": "string", "minLength": 1, "pattern": "^[^\\x00]*$"},
    ],
    "description": "a workspace's id or name",
}


@extend_schema_field(WORKSPACE_REF_SCHEMA)
class WorkspaceRefField(serializers.Field):
    """A workspace named by its id (a positive integer) or its name (a non-empty string);
    ``registry.workspaces.find_workspace`` resolves it."""

    def to_internal_value(self, data: Any) -> int | str:
        valid = (isinstance(data, int) and not isinstance(data, bool) and 1 <= data <= _ID_MAX) or (
            isinstance(data, str) and data != "" and "\x00" not in data
        )
        if not valid:
            raise serializers.ValidationError(
                "Must be a workspace id (a positive integer) or name."
            )
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class ModelCreateSerializer(StrictSerializer):
    """``{"name": ..., "workspace"?: id or name, "description"?: str, "labels"?: [str],
    "metadata"?: {...}}``; without ``workspace`` the model goes to the default workspace."""

    # The pattern documents validate_name's rule in the schema; validate_name enforces it.
    name = StrictCharField(
        max_length=MODEL_NAME_MAX,
        trim_whitespace=False,
        validators=[RegexValidator(rf"^{MODEL_NAME_PATTERN}$")],
    )
    workspace = WorkspaceRefField(required=False)
    description = multiline_text_field(DESCRIPTION_MAX, default="")
    labels = labels_field()
    metadata = StorableDictField(required=False)

    def validate_name(self, value: str) -> str:
        try:
            return validate_model_name(value)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.errors["name"]) from None


class ModelUpdateSerializer(StrictSerializer):
    """Any of ``description``, ``labels`` (replaces the list), ``metadata`` (replaces the
    mapping), ``archived``, ``workspace`` (an id or name: moves the model there). The name
    cannot change."""

    description = multiline_text_field(DESCRIPTION_MAX)
    labels = labels_field()
    metadata = StorableDictField(required=False)
    archived = StrictBooleanField(required=False)
    workspace = WorkspaceRefField(required=False)


class VersionCreateSerializer(StrictSerializer):
    """``{"checkpoint_uuid": uuid, "name"?, "comment"?, "labels"?, "metadata"?}``."""

    checkpoint_uuid = StrictUUIDField()
    name = StrictCharField(required=False, allow_blank=True, max_length=256, default="")
    comment = multiline_text_field(DESCRIPTION_MAX, default="")
    labels = labels_field()
    metadata = StorableDictField(required=False)


class VersionUpdateSerializer(StrictSerializer):
    """Any of ``name``, ``comment``, ``labels`` (replaces the list), ``metadata`` (replaces)."""

    name = StrictCharField(required=False, allow_blank=True, max_length=256)
    comment = multiline_text_field(DESCRIPTION_MAX)
    labels = labels_field()
    metadata = StorableDictField(required=False)


class AliasPointerSerializer(serializers.Serializer):
    """``{"alias", "version"}``: one alias of a model and the version number it points at."""

    alias = serializers.CharField(read_only=True)
    version = serializers.IntegerField(read_only=True)


class RegisteredModelSerializer(serializers.ModelSerializer):
    """A model and its workspace (id and name; the viewset joins it); ``num_versions`` and
    ``latest_version`` are annotated by the viewset."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    workspace_id = serializers.IntegerField(read_only=True)
    workspace_name = serializers.CharField(source="workspace.name", read_only=True)
    num_versions = serializers.IntegerField(read_only=True, default=0)
    latest_version = serializers.IntegerField(read_only=True, allow_null=True, default=None)
    aliases = serializers.SerializerMethodField(help_text="the model's aliases, by name")

    class Meta:
        model = RegisteredModel
        fields: ClassVar[list[str]] = [
            "id",
            "name",
            "description",
            "labels",
            "metadata",
            "owner",
            "workspace_id",
            "workspace_name",
            "archived",
            "num_versions",
            "latest_version",
            "aliases",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(AliasPointerSerializer(many=True))
    def get_aliases(self, obj: RegisteredModel) -> list[dict[str, Any]]:
        # ``obj.aliases`` is prefetched with the versions joined (the viewset's ``_models()``).
        return [
            {"alias": a.alias, "version": a.version.version}
            for a in sorted(obj.aliases.all(), key=lambda a: a.alias)
        ]


class VersionCheckpointSerializer(serializers.ModelSerializer):
    """The checkpoint a version holds (needs ``checkpoint__trial`` joined)."""

    trial_id = serializers.IntegerField(read_only=True)
    experiment_id = serializers.IntegerField(source="trial.experiment_id", read_only=True)
    # Plain text in the schema: a second component with the CheckpointState enum would make
    # drf-spectacular name the shared enum by a hash ("State9b1Enum") and warn.
    state = serializers.CharField(
        read_only=True, help_text="COMPLETED, DELETING, DELETED or DELETE_FAILED"
    )

    class Meta:
        model = Checkpoint
        fields: ClassVar[list[str]] = [
            "uuid",
            "trial_id",
            "experiment_id",
            "steps_completed",
            "size",
            "state",
            "resources",
            "created_at",
        ]
        read_only_fields = fields


class ModelVersionSerializer(serializers.ModelSerializer):
    """A version with its checkpoint embedded and the checkpoint's tar download URL (absolute
    when the request is in the serializer's context)."""

    model = serializers.CharField(source="model.name", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    checkpoint = VersionCheckpointSerializer(read_only=True)
    download_url = serializers.SerializerMethodField()
    aliases = serializers.SerializerMethodField(help_text="the aliases pointing at this version")

    class Meta:
        model = ModelVersion
        fields: ClassVar[list[str]] = [
            "model",
            "version",
            "name",
            "comment",
            "labels",
            "metadata",
            "owner",
            "checkpoint",
            "download_url",
            "aliases",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_aliases(self, obj: ModelVersion) -> list[str]:
        # Prefetched by the list view; one query otherwise.
        return sorted(alias.alias for alias in obj.aliases.all())

    @extend_schema_field(serializers.URLField())
    def get_download_url(self, obj: ModelVersion) -> str:
        path = reverse("registry-api:checkpoint-download", kwargs={"uuid": str(obj.checkpoint_id)})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class AliasSetSerializer(StrictSerializer):
    """``{"version": N}``: the version number the alias is to point at."""

    version = serializers.IntegerField(min_value=1, max_value=2**31 - 1)

    def to_internal_value(self, data: Any) -> Any:
        # DRF's IntegerField takes "3" and 3.0 too; a version number is a JSON integer.
        if isinstance(data, dict) and "version" in data:
            value = data["version"]
            if isinstance(value, bool) or not isinstance(value, int):
                raise serializers.ValidationError({"version": ["Must be an integer."]})
        return super().to_internal_value(data)


class ModelAliasSerializer(serializers.ModelSerializer):
    """An alias: its name, the version number it points at, who set it last and when."""

    model = serializers.CharField(source="model.name", read_only=True)
    version = serializers.IntegerField(source="version.version", read_only=True)
    set_by = serializers.CharField(source="set_by.username", read_only=True, allow_null=True)

    class Meta:
        model = ModelAlias
        fields: ClassVar[list[str]] = ["model", "alias", "version", "set_by", "updated_at"]
        read_only_fields = fields


class ModelAliasEventSerializer(serializers.ModelSerializer):
    """One alias change: ``action`` SET, MOVE, DELETE or VERSION_DELETED, from one version
    number to another (null: none), by ``user`` at ``created_at``."""

    user = serializers.CharField(source="user.username", read_only=True, allow_null=True)
    action = serializers.CharField(read_only=True, help_text="SET, MOVE, DELETE or VERSION_DELETED")

    class Meta:
        model = ModelAliasEvent
        fields: ClassVar[list[str]] = [
            "id",
            "alias",
            "action",
            "from_version",
            "to_version",
            "user",
            "created_at",
        ]
        read_only_fields = fields
