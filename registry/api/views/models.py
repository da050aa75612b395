"""``/api/v1/models/`` and ``/api/v1/models/{name}/versions/``: the model registry.

A model lives in a workspace: users with a role there read it (others get 404, and lists leave
it out); its owner as an editor there, the workspace's admins and site admins change it (403).
Trial tokens read what their owner may read (a trial may warm-start from a registered version),
never write. The rules live in ``registry.model_registry`` and ``registry.authz``; these views
parse input and shape output.
"""

from __future__ import annotations

from typing import ClassVar

import django_filters
from django.db.models import Count, Max, Prefetch, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from registry import model_registry as svc
from registry.api.model_serializers import (
    ModelCreateSerializer,
    ModelUpdateSerializer,
    ModelVersionSerializer,
    RegisteredModelSerializer,
    VersionCreateSerializer,
    VersionUpdateSerializer,
)
from registry.api.params import (
    bool_param,
    int_query_parameter,
    optional_int_param,
    single_value,
)
from registry.authz import scoped
from registry.errors import InvalidInput
from registry.models import ModelAlias, ModelVersion, RegisteredModel

READ_ACTIONS = ("list", "retrieve")


class RegisteredModelFilter(django_filters.FilterSet):
    """``?name=`` (part of the name, case-insensitive), ``?label=`` (one label, exact),
    ``?archived=true|false`` (absent: both). ``?workspace=`` is read by the view."""

    name = django_filters.CharFilter(lookup_expr="icontains")
    label = django_filters.CharFilter(method="filter_label")
    archived = django_filters.ChoiceFilter(
        choices=[("true", "true"), ("false", "false")], method="filter_archived"
    )

    class Meta:
        model = RegisteredModel
        fields: ClassVar[list[str]] = []

    def filter_label(
        self, qs: QuerySet[RegisteredModel], name: str, value: str
    ) -> QuerySet[RegisteredModel]:
        return svc.with_label(qs, value)

    def filter_archived(
        self, qs: QuerySet[RegisteredModel], name: str, value: str
    ) -> QuerySet[RegisteredModel]:
        return qs.filter(archived=value == "true")


def _models(user: object) -> QuerySet[RegisteredModel]:
    """The models ``user`` may read, with what the serializer shows joined."""
    aliases = ModelAlias.objects.select_related("version").order_by("alias")
    return (
        scoped(RegisteredModel.objects, user)
        .select_related("owner", "workspace")
        .annotate(num_versions=Count("versions"), latest_version=Max("versions__version"))
        .prefetch_related(Prefetch("aliases", queryset=aliases))
    )


_NO_NUL = {"type": "string", "pattern": "^[^\\x00]*$"}


class RegisteredModelViewSet(viewsets.GenericViewSet):
    """Models by name: list (filters), create, retrieve, partial update, delete."""

    queryset = RegisteredModel.objects.none()  # for the schema; reads go through ``_models()``
    lookup_field = "name"
    lookup_value_regex = svc.MODEL_NAME_PATTERN
    allow_trial_token = READ_ACTIONS

    def _get(self, name: str) -> RegisteredModel:
        model = _models(self.request.user).filter(name=name).first()
        if model is None:
            raise svc.ModelNotFound(f"No model named {name!r}.")
        return model

    @extend_schema(
        parameters=[
            # No NUL character (400), as every text field of the API.
            OpenApiParameter("name", _NO_NUL, description="part of the name (case-insensitive)"),
            OpenApiParameter("label", _NO_NUL, description="models with this label"),
            OpenApiParameter("archived", bool, description="only archived (true) or not (false)"),
            int_query_parameter(
                "workspace", lo=1, hi=2**63 - 1, description="only the models of this workspace"
            ),
        ],
        responses=RegisteredModelSerializer(many=True),
    )
    def list(self, request: Request) -> Response:
        # django-filter takes the last of repeated values and skips an empty one: both are 400s
        # here, as for every query parameter of the API (registry.api.params).
        for param in ("name", "label"):
            single_value(request, param)
        bool_param(request, "archived")
        models = _models(request.user)
        workspace = optional_int_param(request, "workspace", lo=1, hi=2**63 - 1)
        if workspace is not None:
            models = models.filter(workspace_id=workspace)
        filterset = RegisteredModelFilter(request.query_params, queryset=models)
        if not filterset.is_valid():
            raise InvalidInput({k: [str(m) for m in v] for k, v in filterset.errors.items()})
        page = self.paginate_queryset(filterset.qs.order_by("name"))
        return self.get_paginated_response(RegisteredModelSerializer(page, many=True).data)

    @extend_schema(request=ModelCreateSerializer, responses={201: RegisteredModelSerializer})
    def create(self, request: Request) -> Response:
        data = ModelCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        model = svc.model_create(owner=request.user, **data.validated_data)
        return Response(
            RegisteredModelSerializer(self._get(model.name)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(responses=RegisteredModelSerializer)
    def retrieve(self, request: Request, name: str) -> Response:
        return Response(RegisteredModelSerializer(self._get(name)).data)

    @extend_schema(request=ModelUpdateSerializer, responses=RegisteredModelSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        model = self._get(name)
        svc.check_can_modify(model, request.user)  # 403 before any 400 about the body
        data = ModelUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        svc.model_update(model=model, user=request.user, **data.validated_data)
        return Response(RegisteredModelSerializer(self._get(name)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        """Delete the model and its versions; their checkpoints are no longer protected."""
        svc.model_delete(model=self._get(name), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(parameters=[OpenApiParameter("model_name", str, OpenApiParameter.PATH)])
class ModelVersionViewSet(viewsets.GenericViewSet):
    """``models/{model_name}/versions/``: list (newest first), register, retrieve, update notes,
    delete. ``{version}`` is the version number (1, 2, ...)."""

    queryset = ModelVersion.objects.none()  # for the schema
    lookup_field = "version"
    lookup_value_regex = r"[0-9]+"
    allow_trial_token = READ_ACTIONS

    def _versions(self, model: RegisteredModel) -> QuerySet[ModelVersion]:
        return (
            ModelVersion.objects.filter(model=model)
            .select_related("owner", "checkpoint__trial")
            .prefetch_related("aliases")
        )

    def _out(self, request: Request, version: ModelVersion) -> dict:
        return ModelVersionSerializer(version, context={"request": request}).data

    def _version(self, model_name: str, version: str) -> ModelVersion:
        model = svc.get_model(model_name, user=self.request.user)
        return svc.get_version(model, int(version))

    @extend_schema(responses=ModelVersionSerializer(many=True))
    def list(self, request: Request, model_name: str) -> Response:
        model = svc.get_model(model_name, user=request.user)
        page = self.paginate_queryset(self._versions(model).order_by("-version"))
        for version in page or []:
            version.model = model
        return self.get_paginated_response(
            ModelVersionSerializer(page, many=True, context={"request": request}).data
        )

    @extend_schema(request=VersionCreateSerializer, responses={201: ModelVersionSerializer})
    def create(self, request: Request, model_name: str) -> Response:
        model = svc.get_model(model_name, user=request.user)
        svc.check_can_modify(model, request.user)  # 403 before any 400 about the body
        data = VersionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        version = svc.version_register(model=model, user=request.user, **data.validated_data)
        return Response(self._out(request, version), status=status.HTTP_201_CREATED)

    @extend_schema(responses=ModelVersionSerializer)
    def retrieve(self, request: Request, model_name: str, version: str) -> Response:
        return Response(self._out(request, self._version(model_name, version)))

    @extend_schema(request=VersionUpdateSerializer, responses=ModelVersionSerializer)
    def partial_update(self, request: Request, model_name: str, version: str) -> Response:
        found = self._version(model_name, version)
        svc.check_can_modify(found.model, request.user)  # 403 before any 400 about the body
        data = VersionUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        svc.version_update(version=found, user=request.user, **data.validated_data)
        return Response(self._out(request, found))

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, model_name: str, version: str) -> Response:
        """Delete the version; its checkpoint is no longer protected by it."""
        svc.version_delete(version=self._version(model_name, version), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
