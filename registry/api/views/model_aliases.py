"""``/api/v1/models/{name}/aliases/`` and ``/api/v1/models/{name}@{alias}/``: model aliases.

Reads (and resolving) are for whoever may read the model (a role in its workspace, else 404),
trial tokens included, as for versions; setting, moving and deleting need the right to change
the model (403). The rules live in
``registry.model_aliases``; these views parse input and shape output.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import model_aliases as aliases
from registry import model_registry as svc
from registry.api.model_serializers import (
    AliasSetSerializer,
    ModelAliasEventSerializer,
    ModelAliasSerializer,
    ModelVersionSerializer,
)
from registry.models import ModelAlias

_MODEL_NAME = OpenApiParameter("model_name", str, OpenApiParameter.PATH)
_ALIAS = OpenApiParameter(
    "alias",
    {"type": "string", "pattern": f"^{aliases.ALIAS_PATTERN}$", "maxLength": aliases.ALIAS_MAX},
    OpenApiParameter.PATH,
    description="an alias name (the route takes any text; a bad one is a 400 naming `alias`)",
)


@extend_schema(parameters=[_MODEL_NAME])
class ModelAliasViewSet(viewsets.GenericViewSet):
    """``models/{model_name}/aliases/``: the current aliases (by name), one alias, set or move
    one (``PUT {"version": N}``), delete one, and ``history/`` (newest first)."""

    queryset = ModelAlias.objects.none()  # for the schema
    lookup_field = "alias"
    # Any segment: a bad name reaches the service and is a 400 naming ``alias``, not a 404.
    lookup_value_regex = "[^/]+"
    allow_trial_token = ("list", "retrieve", "history")

    def _out(self, alias: ModelAlias) -> dict:
        return ModelAliasSerializer(alias).data

    @extend_schema(responses=ModelAliasSerializer(many=True))
    def list(self, request: Request, model_name: str) -> Response:
        model = svc.get_model(model_name, user=request.user)
        page = self.paginate_queryset(aliases.aliases_of(model))
        return self.get_paginated_response(ModelAliasSerializer(page, many=True).data)

    @extend_schema(parameters=[_ALIAS], responses=ModelAliasSerializer)
    def retrieve(self, request: Request, model_name: str, alias: str) -> Response:
        return Response(
            self._out(aliases.find_alias(svc.get_model(model_name, user=request.user), alias))
        )

    @extend_schema(parameters=[_ALIAS], request=AliasSetSerializer, responses=ModelAliasSerializer)
    def update(self, request: Request, model_name: str, alias: str) -> Response:
        """Set the alias, or move it to another version (one atomic update)."""
        model = svc.get_model(model_name, user=request.user)
        svc.check_can_modify(model, request.user)  # 403 before any 400 about the body
        data = AliasSetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        found = aliases.alias_set(
            model=model, alias=alias, version=data.validated_data["version"], user=request.user
        )
        return Response(self._out(found))

    @extend_schema(parameters=[_ALIAS], responses={204: None})
    def destroy(self, request: Request, model_name: str, alias: str) -> Response:
        """Delete the alias; the version stays."""
        aliases.alias_delete(
            model=svc.get_model(model_name, user=request.user), alias=alias, user=request.user
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=ModelAliasEventSerializer(many=True))
    @action(detail=False, methods=["get"])
    def history(self, request: Request, model_name: str) -> Response:
        """Every set, move and deletion of the model's aliases, newest first."""
        model = svc.get_model(model_name, user=request.user)
        page = self.paginate_queryset(aliases.alias_history(model))
        return self.get_paginated_response(ModelAliasEventSerializer(page, many=True).data)


class ModelAliasResolveView(APIView):
    """``GET models/{model_name}@{alias}/``: the version the alias points at, exactly as
    ``GET models/{model_name}/versions/{n}/`` answers it (``@latest``: the newest version)."""

    action = "retrieve"  # what IsUserOrTrialScoped matches against allow_trial_token
    allow_trial_token = ("retrieve",)

    @extend_schema(
        operation_id="models_alias_resolve",
        parameters=[
            _MODEL_NAME,
            OpenApiParameter(
                "alias",
                {"type": "string", "pattern": f"^{aliases.ALIAS_PATTERN}$"},
                OpenApiParameter.PATH,
                description="an alias of the model, or `latest` (its newest version)",
            ),
        ],
        responses=ModelVersionSerializer,
    )
    def get(self, request: Request, model_name: str, alias: str) -> Response:
        version = aliases.resolve_alias(svc.get_model(model_name, user=request.user), alias)
        return Response(ModelVersionSerializer(version, context={"request": request}).data)
