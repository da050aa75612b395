"""Top-level routes: REST API, dashboard, login, admin, health check."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.urls import include, path


def healthz(request):
    """Unauthenticated liveness probe for load balancers and the demo script."""
    return JsonResponse({"status": "ok"})


# JSON 404s under /api/ (registry/api/errors.py), Django's page elsewhere.
handler404 = "registry.api.errors.not_found"
# A transient database error (pool exhausted, server restarting) anywhere, middleware included,
# is a 503 with Retry-After (registry/overload.py); other 500s are JSON under /api/.
handler500 = "registry.overload.server_error"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include("registry.api.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("dashboard.urls")),
]
