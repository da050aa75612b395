"""``/api/v1/resource-pools/``: the admin's resource pools and what each holds now."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from registry.pools import PoolSummary, pool_summaries


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


@extend_schema_view(
    list=extend_schema(
        summary="Resource pools",
        description=(
            "Every resource pool of the admin's HEADWAY_RESOURCE_POOLS file (`default` always), "
            "in the file's order: type, description, alive hosts (heartbeat within "
            "HEADWAY_HOST_TIMEOUT_SECONDS), their slots, slots in use and runs waiting to be "
            "placed. Pools that only hosts or runs still name follow, with configured false."
        ),
    ),
)
class ResourcePoolViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Read-only: the pools are the admin's file (``registry.pools``), never written over REST."""

    serializer_class = ResourcePoolSerializer

    def get_queryset(self) -> list[PoolSummary]:  # type: ignore[override]
        return pool_summaries()
