"""``/api/v1/resource-pools/``: the admin's resource pools and what each holds now; a slurm
pool's nodes Headway excluded after failed starts, and the admin's route that puts one back
(``registry.slurm._nodes``)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.api.host_auth import IsAdmin
from registry.pools import PoolSummary, pool_summaries, resource_pools
from registry.slurm import SlurmNodeNotFound, node_enable


class SlurmNodeSerializer(serializers.Serializer):
    """A slurm pool's node as Headway's own jobs found it (``registry.models.SlurmNode``)."""

    name = serializers.CharField(read_only=True, help_text="Slurm's node name")
    pool = serializers.CharField(read_only=True)
    failed_starts = serializers.IntegerField(
        read_only=True, help_text="runs lost on it in a row before their ranks started"
    )
    excluded_reason = serializers.CharField(
        read_only=True,
        help_text="why Headway's jobs avoid it (sbatch --exclude); empty when they do not",
    )
    excluded_at = serializers.DateTimeField(read_only=True, allow_null=True)


class ResourcePoolSerializer(serializers.Serializer):
    """One resource pool (``registry.pools.PoolSummary``): its entry in the admin's file and
    its alive hosts, their slots, slots in use and queued runs."""

    name = serializers.CharField(read_only=True)
    type = serializers.CharField(
        read_only=True,
        help_text="agent: Headway's host agents; slurm: each run is a Slurm batch job",
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
        read_only=True, help_text="slurm pools: jobs Slurm holds pending (0 for agent pools)"
    )
    jobs_running = serializers.IntegerField(
        read_only=True, help_text="slurm pools: jobs running now (their nodes are its hosts)"
    )
    excluded_nodes = SlurmNodeSerializer(
        many=True,
        read_only=True,
        help_text="slurm pools: nodes Headway's jobs avoid after runs failed to start there "
        "(HEADWAY_HOST_MAX_FAILED_STARTS in a row), with the reason; [] for agent pools",
    )


@extend_schema_view(
    list=extend_schema(
        summary="Resource pools",
        description=(
            "Every resource pool of the admin's HEADWAY_RESOURCE_POOLS file (`default` always), "
            "in the file's order: type, description, alive hosts (heartbeat within "
            "HEADWAY_HOST_TIMEOUT_SECONDS), their slots, slots in use and runs waiting to be "
            "placed; a slurm pool's jobs and the nodes Headway excluded after failed starts. "
            "Pools that only hosts or runs still name follow, with configured false."
        ),
    ),
)
class ResourcePoolViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Read-only: the pools are the admin's file (``registry.pools``), never written over REST."""

    serializer_class = ResourcePoolSerializer

    def get_queryset(self) -> list[PoolSummary]:  # type: ignore[override]
        return pool_summaries()


class SlurmNodeEnableView(APIView):
    """``POST /api/v1/resource-pools/{pool}/slurm-nodes/{node}/enable/`` (admins): the node is
    no longer excluded and its count of failed starts begins again."""

    permission_classes = (IsAdmin,)

    def permission_denied(self, request, message=None, code=None):
        # IsAdmin's own message speaks of host tokens.
        super().permission_denied(
            request, message="Only an admin may enable a Slurm node.", code=code
        )

    @extend_schema(
        tags=["resource-pools"],
        summary="Put back a Slurm node Headway excluded (admin)",
        request=None,
        responses={200: SlurmNodeSerializer},
    )
    def post(self, request, pool: str, node: str):
        """404 naming the pool when it is not a slurm pool of the admin's file, or naming the
        node when Headway never counted a failed start on it."""
        if pool not in {p.name for p in resource_pools().slurm_pools()}:
            raise SlurmNodeNotFound(f"No slurm pool named {pool} in HEADWAY_RESOURCE_POOLS.")
        row = node_enable(namespace=settings.CELERY_TASK_DEFAULT_QUEUE, pool=pool, name=node)
        return Response(SlurmNodeSerializer(row).data)
