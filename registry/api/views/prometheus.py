"""``GET /metrics``: the master's Prometheus series (``registry.prometheus``), never open.

Who may scrape: a request with ``Authorization: Bearer <HEADWAY_METRICS_TOKEN>`` (the dedicated
scrape token: it reaches this route only, and needs no database lookup, so the series still
answer while the database is down), or an admin's user token or dashboard session. Anyone else
gets 401 (no credentials, a wrong scrape token) or 403 (a user who is not an admin, a run token).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    get_authorization_header,
)
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.views import APIView

from registry.api.authentication import HeadwayTokenAuthentication
from registry.api.host_auth import IsAdmin
from registry.prometheus import exposition


class ScrapeToken:
    """``request.auth`` of a request that presented the scrape token."""


SCRAPE_TOKEN = ScrapeToken()


class ScrapeTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <HEADWAY_METRICS_TOKEN>`` (compared in constant time).

    Raises:
        AuthenticationFailed: (401) a Bearer credential that is not the scrape token, or any
            Bearer credential while no scrape token is configured.
    """

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None  # a user token (Token ...) or a session: the next authenticators'
        expected = settings.HEADWAY_METRICS_TOKEN.encode()
        if len(parts) != 2 or not expected or not hmac.compare_digest(parts[1], expected):
            raise AuthenticationFailed("Invalid scrape token.")
        return AnonymousUser(), SCRAPE_TOKEN

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="headway-metrics"'


class ScrapeTokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of the scrape token (``/metrics`` only)."""

    target_class = ScrapeTokenAuthentication
    name = "scrapeToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The scrape token, HEADWAY_METRICS_TOKEN (docs/deployment.md).",
        }


class ScrapeTokenOrAdmin(BasePermission):
    message = "Only the scrape token (HEADWAY_METRICS_TOKEN) or an admin may read the metrics."

    def has_permission(self, request: Any, view: Any) -> bool:
        return request.auth is SCRAPE_TOKEN or IsAdmin().has_permission(request, view)


class _FirstRenderer(BaseContentNegotiation):
    """The body is Prometheus' format (chosen from Accept by prometheus_client); DRF's renderer
    only writes errors, as JSON, whatever Accept says (never a 406 to a scraper)."""

    def select_parser(self, request: Any, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Any, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type


class PrometheusMetricsView(APIView):
    authentication_classes = (
        ScrapeTokenAuthentication,
        HeadwayTokenAuthentication,
        SessionAuthentication,
    )
    permission_classes = (ScrapeTokenOrAdmin,)
    renderer_classes = (JSONRenderer,)
    content_negotiation_class = _FirstRenderer

    @extend_schema(
        tags=["health"],
        summary="Prometheus metrics",
        description=(
            "Prometheus text exposition (OpenMetrics when Accept asks for it). Authorization: "
            "`Bearer <HEADWAY_METRICS_TOKEN>` or an admin's token or session."
        ),
        responses={200: OpenApiResponse(description="text/plain; version=0.0.4")},
    )
    def get(self, request: Any) -> HttpResponse:
        """Every series (registry/prometheus.py), computed now."""
        body, content_type = exposition(request.headers.get("Accept", ""))
        return HttpResponse(body, content_type=content_type)
