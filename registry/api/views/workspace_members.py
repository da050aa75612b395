"""``workspaces/{id}/members/`` and ``PATCH workspaces/{id}/``: a workspace's role bindings and
its ``everyone_role`` (its admins and site admins change them; ``registry.workspace_roles``)."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from registry import workspace_roles
from registry.api.model_serializers import StrictSerializer
from registry.authz import ensure_readable
from registry.models import RoleBinding
from registry.models.workspace import EVERYONE_ROLE_CHOICES, Role


class BindingSerializer(serializers.ModelSerializer):
    """One binding: ``user`` or ``group`` (the other None) and its ``role``."""

    user = serializers.CharField(source="user.username", read_only=True, allow_null=True)
    group = serializers.CharField(source="group.name", read_only=True, allow_null=True)
    role = serializers.ChoiceField(choices=Role.choices, read_only=True)

    class Meta:
        model = RoleBinding
        fields: ClassVar[list[str]] = ["id", "user", "group", "role"]
        read_only_fields = fields


class GrantSerializer(StrictSerializer):
    """``{"user": name, "role": ...}`` or ``{"group": name, "role": ...}``."""

    user = serializers.CharField(required=False, max_length=150)
    group = serializers.CharField(required=False, max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)


class WorkspacePatchSerializer(StrictSerializer):
    """``{"everyone_role": null | "viewer" | "editor"}``."""

    everyone_role = serializers.ChoiceField(
        choices=EVERYONE_ROLE_CHOICES, allow_null=True, required=False
    )


class WorkspaceMembersMixin:
    """For ``WorkspaceViewSet`` (needs its ``_get`` and ``_out``)."""

    _get: Any
    _out: Any
    paginate_queryset: Any
    get_paginated_response: Any

    @extend_schema(request=WorkspacePatchSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        """Set ``everyone_role`` (the workspace's admins): 400 naming it for another role."""
        data = WorkspacePatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        workspace = self._get(pk)
        if "everyone_role" in data.validated_data:  # an empty PATCH changes nothing
            workspace_roles.set_everyone_role(
                workspace=workspace, actor=request.user, role=data.validated_data["everyone_role"]
            )
        return self._out(pk)

    @extend_schema(methods=["GET"], responses=BindingSerializer(many=True))
    @extend_schema(methods=["POST"], request=GrantSerializer, responses={201: BindingSerializer})
    @action(detail=True, methods=["get", "post"])
    def members(self, request: Request, pk: str) -> Response:
        """The role bindings (anyone with a role there reads them); POST binds a user or a
        group (the workspace's admins; an existing binding gets the new role)."""
        workspace = self._get(pk)
        if request.method == "GET":
            ensure_readable(request.user, workspace.id, f"workspace {pk}")
            page = self.paginate_queryset(workspace_roles.bindings(workspace))
            return self.get_paginated_response(BindingSerializer(page, many=True).data)
        data = GrantSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        binding = workspace_roles.grant(
            workspace=workspace, actor=request.user, **data.validated_data
        )
        return Response(BindingSerializer(binding).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["delete"], url_path=r"members/(?P<binding_id>[0-9]{1,18})")
    def member(self, request: Request, pk: str, binding_id: str) -> Response:
        """Remove a binding (the workspace's admins); 404 when the workspace has no such one."""
        workspace_roles.revoke(
            workspace=self._get(pk), actor=request.user, binding_id=int(binding_id)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
