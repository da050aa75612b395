"""``/api/v1/resource-pools/``: the admin's resource pools and what each holds now (what only
its type knows from its provider's ``describe``); the nodes Headway excluded after failed
starts, and the admin's route that puts one back (``PoolProvider.node_enable``; a pool type
without nodes answers 400)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.api.host_auth import IsAdmin
from registry.errors import InvalidInput, RegistryError
from registry.pools import NoNodes, pool_provider, resource_pools
from registry.scheduling import PoolSummary, pool_summaries


class PoolNotFound(RegistryError):
    """404: no pool of that name in the admin's file."""

    status = 404


class PoolNodeSerializer(serializers.Serializer):
    """A pool's node as Headway's own runs found it (``registry.pools.PoolNode``)."""

    name = serializers.CharField(read_only=True, help_text="the node's name in its cluster")
    pool = serializers.CharField(read_only=True)
    failed_starts = serializers.IntegerField(
        read_only=True, help_text="runs lost on it in a row before their ranks started"
    )
    excluded_reason = serializers.CharField(
        read_only=True,
        help_text="why Headway's runs avoid it; empty when they do not",
    )
    excluded_at = serializers.DateTimeField(read_only=True, allow_null=True)


class ResourcePoolSerializer(serializers.Serializer):
    """One resource pool (``registry.pools.PoolSummary``): its entry in the admin's file and
    its alive hosts, their slots, slots in use and queued runs."""

    name = serializers.CharField(read_only=True)
    type = serializers.CharField(
        read_only=True,
        help_text="the pool type (agent: Headway's host agents; docs/scheduling.md lists the "
        "others)",
    )
    description = serializers.CharField(read_only=True)
    hosts = serializers.IntegerField(read_only=True, help_text="alive hosts in the pool")
    slots = serializers.IntegerField(read_only=True, help_text="slots of the alive hosts")
    slots_in_use = serializers.IntegerField(
        read_only=True, help_text="slots of alive hosts held by placed, starting or running runs"
    )
    queued_runs = serializers.IntegerField(
        read_only=True, help_text="runs of the pool waiting to be placed"
    )
    configured = serializers.BooleanField(
        read_only=True,
        help_text="false for a pool that hosts or runs still name but the file no longer lists",
    )
    jobs_pending = serializers.IntegerField(
        read_only=True,
        help_text="pools whose runs are batch jobs: jobs pending in the cluster (0 for agent "
        "pools)",
    )
    jobs_running = serializers.IntegerField(
        read_only=True,
        help_text="pools whose runs are batch jobs: jobs running now (their nodes are its hosts)",
    )
    cluster_nodes = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="pools whose runs are jobs of a cluster: its alive nodes at the last poll "
        "(null for agent pools or before the first poll)",
    )
    cluster_slots = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="pools whose runs are jobs of a cluster: the slots its alive nodes hold",
    )
    cluster_error = serializers.CharField(
        read_only=True, help_text="why the pool's cluster did not answer its last poll; empty"
    )
    pending_reasons = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="why each pending job waits, in the cluster's own words ([] for agent pools)",
    )
    excluded_nodes = PoolNodeSerializer(
        many=True,
        read_only=True,
        help_text="nodes Headway's runs avoid after runs failed to start there "
        "(HEADWAY_HOST_MAX_FAILED_STARTS in a row), with the reason; [] for agent pools",
    )


@extend_schema_view(
    list=extend_schema(
        summary="Resource pools",
        description=(
            "Every resource pool of the admin's HEADWAY_RESOURCE_POOLS file (`default` always), "
            "in the file's order: type, description, alive hosts (heartbeat within "
            "HEADWAY_HOST_TIMEOUT_SECONDS), their slots, slots in use and runs waiting to be "
            "placed; a batch pool's jobs and the nodes Headway excluded after failed starts. "
            "Pools that only hosts or runs still name follow, with configured false."
        ),
    ),
)
class ResourcePoolViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Read-only: the pools are the admin's file (``registry.pools``), never written over REST."""

    serializer_class = ResourcePoolSerializer

    def get_queryset(self) -> list[PoolSummary]:  # type: ignore[override]
        return pool_summaries()


class PoolNodeEnableView(APIView):
    """``POST /api/v1/resource-pools/{pool}/nodes/{node}/enable/`` (admins): the node is no
    longer excluded and its count of failed starts begins again."""

    permission_classes = (IsAdmin,)

    def permission_denied(self, request, message=None, code=None):
        # IsAdmin's own message speaks of host tokens.
        super().permission_denied(
            request, message="Only an admin may enable a pool's node.", code=code
        )

    @extend_schema(
        tags=["resource-pools"],
        summary="Put back a pool's node Headway excluded (admin)",
        description=(
            "For a pool whose type has nodes of its own (its runs' batch jobs run on them). "
            "400 naming `pool` for a pool type without nodes, 404 for an unknown pool or a "
            "node Headway never counted a failed start on, 400 naming `node` for a bad name."
        ),
        request=None,
        responses={200: PoolNodeSerializer},
    )
    def post(self, request, pool: str, node: str):
        """See the schema's description."""
        found = resource_pools().pools.get(pool)
        if found is None:
            raise PoolNotFound(f"No resource pool named {pool} in HEADWAY_RESOURCE_POOLS.")
        try:
            row = pool_provider(found.type).node_enable(
                settings.CELERY_TASK_DEFAULT_QUEUE, pool, node
            )
        except NoNodes as exc:
            raise InvalidInput({"pool": [str(exc)]}) from None
        return Response(PoolNodeSerializer(row).data)
