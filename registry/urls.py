"""The registry's routes at the top of the site: the load balancers' probe and Prometheus'
scrape (``config/urls.py`` includes them by name, before the dashboard's catch-all routes)."""

from django.http import HttpRequest, JsonResponse
from django.urls import path

from registry.api.views.prometheus import PrometheusMetricsView
from registry.health import check_database


def healthz(request: HttpRequest) -> JsonResponse:
    """Unauthenticated probe for load balancers and the demo script: this web server answers and
    its database answers ``SELECT 1`` (else 503 with Retry-After). The broker, the master worker
    and storage are ``/api/v1/health/``'s (docs/decisions/operations.md): a web server serves
    the dashboard, metric reports and heartbeats without them, so a load balancer must keep it.
    """
    database = check_database()
    if not database.ok:
        body = {"status": "down", "detail": f"database: {database.detail}"}
        return JsonResponse(body, status=503, headers={"Retry-After": "2"})
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Prometheus' default metrics_path; scrape token or admin only (registry/api/views/prometheus.py).
    path("metrics", PrometheusMetricsView.as_view(), name="prometheus-metrics"),
]
