"""``/api/v1/host-tokens/``: admins issue, list and revoke worker hosts' tokens.

The key of a new token is in the creation answer only; the registry keeps its SHA-256. Revoking
keeps the row (who, when) and refuses the key from its next request on. The same operations:
``python manage.py headway_host_token`` and ``headway host-token``.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.views import APIView

from headway.client import _wire as wire
from registry.api.answers import answer
from registry.api.host_agent_serializers import HostTokenCreateRequestSerializer
from registry.api.host_auth import IsAdmin
from registry.lifecycle.host_tokens import host_token_info, host_token_issue, host_token_revoke
from registry.models import HostToken

TAG = ["host tokens"]


class HostTokenListView(APIView):
    permission_classes = (IsAdmin,)

    @extend_schema(tags=TAG, summary="Host tokens", responses={200: wire.HostTokenList})
    def get(self, request):
        """Every host token, live and revoked, by name (never a key)."""
        tokens = HostToken.objects.select_related("created_by")
        data = {"tokens": [host_token_info(token) for token in tokens]}
        return answer(wire.HostTokenList, data)

    @extend_schema(
        tags=TAG,
        summary="Issue a host token",
        request=HostTokenCreateRequestSerializer,
        responses={201: wire.HostTokenCreated},
    )
    def post(self, request):
        """A token for host ``name``; its key is in this answer only. 409 while ``name`` has a
        live token."""
        serializer = HostTokenCreateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, key = host_token_issue(serializer.validated_data["name"], request.user)
        data = host_token_info(token) | {"key": key}
        return answer(wire.HostTokenCreated, data, status=201)


class HostTokenDetailView(APIView):
    permission_classes = (IsAdmin,)

    @extend_schema(tags=TAG, summary="Revoke a host token", responses={200: wire.HostTokenInfo})
    def delete(self, request, name: str):
        """The host's live token is refused from its next request on (404 when none)."""
        token = host_token_revoke(name)
        return answer(wire.HostTokenInfo, host_token_info(token))
