"""``GET /api/v1/health/``: every component the cluster needs, each with its status.

``/healthz`` (config/urls.py) stays the load balancers' cheap probe of one web server and its
database; this route is the operator's view of the whole cluster (``registry.health``).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.health import health_report

TAG = ["health"]
# Seconds a client or monitor is asked to wait before asking again after a 503.
RETRY_AFTER_SECONDS = 10


class ComponentHealthSerializer(serializers.Serializer):
    """One component (``registry.health.ComponentHealth``)."""

    name = serializers.CharField(
        help_text="database, broker, master_worker or storage:<location name>"
    )
    status = serializers.ChoiceField(
        choices=["ok", "down", "unknown"],
        help_text="unknown: not checked because the database is down",
    )
    detail = serializers.CharField(help_text="what was checked and what was found")
    checked_at = serializers.DateTimeField()
    last_beat_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="master_worker only: its last completed lost-run reaper pass",
    )


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "down"])
    down = serializers.ListField(
        child=serializers.CharField(), help_text="names of the components that are not ok"
    )
    components = ComponentHealthSerializer(many=True)


class HealthView(APIView):
    """Any logged-in user may read it (as the Workers page shows it); run and host tokens may
    not (the default permission)."""

    @extend_schema(
        tags=TAG,
        summary="Component health",
        description=(
            "Checks the database, the broker, the master worker's last reaper pass and every "
            "storage location now. 200 when all are ok; 503 with Retry-After naming in `down` "
            "what is not."
        ),
        responses={
            200: HealthSerializer,
            503: OpenApiResponse(HealthSerializer, description="some component is not ok"),
        },
    )
    def get(self, request):
        """Check every component now and answer 200 (all ok) or 503 naming what is down."""
        report = health_report()
        if report.ok:
            return Response(report.as_dict())
        return Response(
            report.as_dict(), status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )
