"""``/api/v1/workers/``: the registered worker hosts, their slots and the runs holding them."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets

from registry.api.serializers import WorkerHostSerializer
from registry.scheduling import host_list


@extend_schema_view(
    list=extend_schema(
        summary="Worker hosts",
        description=(
            "Every registered host by name: slots, slots in use (runs placed on it that have "
            "not exited), devices, whether it heartbeated within HEADWAY_HOST_TIMEOUT_SECONDS, "
            "and the trial runs holding its slots."
        ),
    ),
    retrieve=extend_schema(summary="One worker host, by name"),
)
class WorkerHostViewSet(viewsets.ReadOnlyModelViewSet):
    """Read-only: hosts are written by their workers (``workers.hosts``), never over REST."""

    serializer_class = WorkerHostSerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9._-]*"

    def get_queryset(self):
        return host_list()
