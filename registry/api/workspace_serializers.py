"""Serializers of ``workspaces/`` and ``projects/`` (and the body of ``experiments/{id}/move``).

Input serializers refuse unknown keys (``StrictSerializer``); names are checked by
``registry.workspaces.validate_workspace_name`` (the pattern documents it in the schema).
"""

from __future__ import annotations

from typing import ClassVar

from django.core.validators import RegexValidator
from rest_framework import serializers

from registry.api.model_serializers import StrictCharField, StrictSerializer, multiline_text_field
from registry.models import Project, Workspace
from registry.models.workspace import EVERYONE_ROLE_CHOICES
from registry.user_text import DESCRIPTION_MAX, LINE_PATTERN
from registry.workspaces import WORKSPACE_NAME_MAX

_ID_MAX = 2**63 - 1


def _name_field() -> StrictCharField:
    return StrictCharField(
        max_length=WORKSPACE_NAME_MAX,
        trim_whitespace=False,
        validators=[
            RegexValidator(LINE_PATTERN, message="Must be one line with no control characters.")
        ],
    )


class WorkspaceSerializer(serializers.ModelSerializer):
    """A workspace; ``owner`` is None for the default one (``immutable``)."""

    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True)
    num_projects = serializers.IntegerField(read_only=True)
    num_experiments = serializers.IntegerField(read_only=True)
    everyone_role = serializers.ChoiceField(
        choices=EVERYONE_ROLE_CHOICES, read_only=True, allow_null=True
    )

    class Meta:
        model = Workspace
        fields: ClassVar[list[str]] = [
            "id",
            "name",
            "owner",
            "archived",
            "immutable",
            "everyone_role",
            "num_projects",
            "num_experiments",
            "created_at",
        ]
        read_only_fields = fields


class ProjectSerializer(serializers.ModelSerializer):
    """A project and its workspace's id and name."""

    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True)
    workspace_id = serializers.IntegerField(read_only=True)
    workspace_name = serializers.CharField(source="workspace.name", read_only=True)
    num_experiments = serializers.IntegerField(read_only=True)

    class Meta:
        model = Project
        fields: ClassVar[list[str]] = [
            "id",
            "name",
            "description",
            "workspace_id",
            "workspace_name",
            "owner",
            "archived",
            "immutable",
            "num_experiments",
            "created_at",
        ]
        read_only_fields = fields


class WorkspaceCreateSerializer(StrictSerializer):
    """``{"name": ...}``."""

    name = _name_field()


class ProjectCreateSerializer(StrictSerializer):
    """``{"workspace": <id>, "name": ..., "description"?: ...}``."""

    workspace = serializers.IntegerField(min_value=1, max_value=_ID_MAX)
    name = _name_field()
    description = multiline_text_field(DESCRIPTION_MAX, default="")


class ExperimentMoveSerializer(StrictSerializer):
    """``{"project": <id>}``: the project to move the experiment into."""

    project = serializers.IntegerField(min_value=1, max_value=_ID_MAX)
