"""``/api/v1/hosts/``: an admin lists, disables (or drains), enables and removes worker hosts.

Determined's ``det agent disable [--drain] | enable`` over REST; every call goes through
``registry.lifecycle.host_ops`` (as ``headway host`` and the dashboard's workers page). Admins
only (``IsAdmin``: users and run tokens 403, host tokens 403); an unknown host is 404. Everyone
logged in reads the hosts at ``/api/v1/workers/``.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.views import APIView

from headway.client import _wire as wire
from registry.api.answers import answer
from registry.api.host_agent_serializers import HostDisableRequestSerializer
from registry.api.host_auth import IsAdmin
from registry.lifecycle import host_ops

TAG = ["hosts"]


class _AdminHostView(APIView):
    permission_classes = (IsAdmin,)

    def permission_denied(self, request, message=None, code=None):
        # IsAdmin's own message speaks of host tokens.
        super().permission_denied(request, message="Only an admin may operate hosts.", code=code)


class HostListView(_AdminHostView):
    @extend_schema(tags=TAG, summary="Hosts (admin)", responses={200: wire.HostStatusList})
    def get(self, request):
        """Every registered host by name: state, alive, slots in use, pool, heartbeat, address."""
        return answer(wire.HostStatusList, {"hosts": host_ops.host_statuses()})


class HostDetailView(_AdminHostView):
    @extend_schema(tags=TAG, summary="Remove a host", responses={200: wire.HostRemoved})
    def delete(self, request, name: str):
        """Forget the host and revoke its token; 409 naming the runs it still holds."""
        return answer(wire.HostRemoved, host_ops.host_remove(name))


class HostDisableView(_AdminHostView):
    @extend_schema(
        tags=TAG,
        summary="Disable or drain a host",
        request=HostDisableRequestSerializer,
        responses={200: wire.HostStatus},
    )
    def post(self, request, name: str):
        """No new run is placed on the host; ``drain``: its running runs finish there, else
        they checkpoint, stop and resume elsewhere (not counted as restarts)."""
        serializer = HostDisableRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        drain = serializer.validated_data["drain"]
        return answer(wire.HostStatus, host_ops.host_disable(name, drain=drain))


class HostEnableView(_AdminHostView):
    @extend_schema(
        tags=TAG, summary="Enable a host", request=None, responses={200: wire.HostStatus}
    )
    def post(self, request, name: str):
        """The host takes new runs again."""
        return answer(wire.HostStatus, host_ops.host_enable(name))
