"""``/api/v1/workspaces/`` and ``/api/v1/projects/``: list, create, retrieve, archive, unarchive.

A user reads the workspaces (and their projects) where they have a role; any logged-in user
creates a workspace (its admin then), editors create projects; archiving is the workspace's
admins' (a project's owner's too) (``registry.authz``). Trial tokens have no access. The rules live in ``registry.workspaces``; these views parse input and shape output.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from registry import workspaces as svc
from registry.api.params import bool_param, int_query_parameter, optional_int_param
from registry.api.views.workspace_members import WorkspaceMembersMixin
from registry.api.workspace_serializers import (
    ProjectCreateSerializer,
    ProjectSerializer,
    WorkspaceCreateSerializer,
    WorkspaceSerializer,
)
from registry.authz import scoped
from registry.models import Project, Workspace, default_project
from registry.path_converters import DatabaseIdConverter

_ID_MAX = 2**63 - 1
_ARCHIVED = OpenApiParameter(
    "archived", str, enum=["true", "false"], description="Only archived (true) or not (false)."
)


def path_id(pk: str, what: str) -> int:
    """The id from the URL; 404 naming ``what`` when it is larger than any database id."""
    try:
        return DatabaseIdConverter().to_python(pk)
    except ValueError:
        raise svc.NotFound(f"No {what} {pk}.") from None


def _projects(user: Any) -> QuerySet[Project]:
    """The projects of the workspaces where ``user`` has a role."""
    return (
        scoped(Project.objects, user)
        .select_related("owner", "workspace")
        .annotate(num_experiments=Count("experiments"))
    )


class WorkspaceViewSet(WorkspaceMembersMixin, viewsets.GenericViewSet):
    """Workspaces by id: list (by name), create, retrieve, set ``everyone_role``, archive,
    unarchive, and their role bindings (``members/``)."""

    queryset = (
        Workspace.objects.none()
    )  # for the schema; reads go through ``svc.readable_workspaces()``
    serializer_class = WorkspaceSerializer
    lookup_value_regex = r"[0-9]+"

    def _get(self, pk: str) -> Workspace:
        found = (
            svc.readable_workspaces(self.request.user).filter(id=path_id(pk, "workspace")).first()
        )
        if found is None:
            raise svc.NotFound(f"No workspace {pk}.")
        return found

    def _out(self, pk: str) -> Response:
        return Response(WorkspaceSerializer(self._get(pk)).data)

    @extend_schema(parameters=[_ARCHIVED], responses=WorkspaceSerializer(many=True))
    def list(self, request: Request) -> Response:
        default_project()  # listed even before any experiment needed it
        qs = svc.readable_workspaces(request.user).order_by("name")
        archived = bool_param(request, "archived")
        if archived is not None:
            qs = qs.filter(archived=archived)
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(WorkspaceSerializer(page, many=True).data)

    @extend_schema(request=WorkspaceCreateSerializer, responses={201: WorkspaceSerializer})
    def create(self, request: Request) -> Response:
        """A new workspace owned by the caller: 409 naming ``name`` when it is taken."""
        data = WorkspaceCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        made = svc.workspace_create(owner=request.user, **data.validated_data)
        return Response(
            WorkspaceSerializer(self._get(str(made.id))).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(responses=WorkspaceSerializer)
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(WorkspaceSerializer(self._get(pk)).data)

    def _archive(self, request: Request, pk: str, archived: bool) -> Response:
        svc.workspace_set_archived(workspace=self._get(pk), user=request.user, archived=archived)
        return Response(WorkspaceSerializer(self._get(pk)).data)

    @extend_schema(request=None, responses=WorkspaceSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request: Request, pk: str) -> Response:
        """Archive (owner or admin): its projects take no new experiments; 409 for the
        default workspace."""
        return self._archive(request, pk, True)

    @extend_schema(request=None, responses=WorkspaceSerializer)
    @action(detail=True, methods=["post"])
    def unarchive(self, request: Request, pk: str) -> Response:
        return self._archive(request, pk, False)


class ProjectViewSet(viewsets.GenericViewSet):
    """Projects by id: list (``?workspace=``), create, retrieve, archive, unarchive."""

    queryset = Project.objects.none()  # for the schema; reads go through ``_projects()``
    serializer_class = ProjectSerializer
    lookup_value_regex = r"[0-9]+"

    def _get(self, pk: str) -> Project:
        found = _projects(self.request.user).filter(id=path_id(pk, "project")).first()
        if found is None:
            raise svc.NotFound(f"No project {pk}.")
        return found

    @extend_schema(
        parameters=[
            int_query_parameter("workspace", lo=1, hi=_ID_MAX, description="Its projects only."),
            _ARCHIVED,
        ],
        responses=ProjectSerializer(many=True),
    )
    def list(self, request: Request) -> Response:
        default_project()  # listed even before any experiment needed it
        qs = _projects(request.user).order_by("workspace__name", "name")
        workspace = optional_int_param(request, "workspace", lo=1, hi=_ID_MAX)
        if workspace is not None:
            qs = qs.filter(workspace_id=workspace)
        archived = bool_param(request, "archived")
        if archived is not None:
            qs = qs.filter(archived=archived)
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(ProjectSerializer(page, many=True).data)

    @extend_schema(request=ProjectCreateSerializer, responses={201: ProjectSerializer})
    def create(self, request: Request) -> Response:
        """A new project owned by the caller in a workspace that is not archived (else 400
        naming ``workspace``); 409 naming ``name`` when the workspace has one of that name."""
        data = ProjectCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        made = svc.project_create(
            owner=request.user,
            workspace_id=fields["workspace"],
            name=fields["name"],
            description=fields["description"],
        )
        return Response(
            ProjectSerializer(self._get(str(made.id))).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(responses=ProjectSerializer)
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(ProjectSerializer(self._get(pk)).data)

    def _archive(self, request: Request, pk: str, archived: bool) -> Response:
        svc.project_set_archived(project=self._get(pk), user=request.user, archived=archived)
        return Response(ProjectSerializer(self._get(pk)).data)

    @extend_schema(request=None, responses=ProjectSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request: Request, pk: str) -> Response:
        """Archive (its owner, its workspace's owner or an admin): it takes no new experiments;
        409 for the default project."""
        return self._archive(request, pk, True)

    @extend_schema(request=None, responses=ProjectSerializer)
    @action(detail=True, methods=["post"])
    def unarchive(self, request: Request, pk: str) -> Response:
        return self._archive(request, pk, False)
