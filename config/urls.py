"""Top-level routes: REST API, dashboard, login, admin, health check."""

from django.contrib import admin
from django.urls import include, path

from config.login_forms import AdminLoginForm

# JSON 404s under /api/ (registry/api/errors.py), Django's page elsewhere.
handler404 = "registry.api.errors.not_found"
# A transient database error (pool exhausted, server restarting) anywhere, middleware included,
# is a 503 with Retry-After (registry/overload.py); other 500s are JSON under /api/.
handler500 = "registry.overload.server_error"
# Usernames longer than their column are a form error, not a 500 (config/login_forms.py).
admin.site.login_form = AdminLoginForm

urlpatterns = [
    # healthz (the load balancers' probe) and metrics (Prometheus' scrape): registry/urls.py.
    path("", include("registry.urls")),
    path("api/v1/", include("registry.api.urls")),
    # The MLflow-compatible API (registry/api/mlflow/): MLflow's client calls /api/2.0/mlflow/.
    path("api/2.0/", include("registry.api.mlflow.urls")),
    # Login (with single sign-on when configured) and logout (accounts/urls.py).
    path("accounts/", include("accounts.urls")),
    path("admin/", admin.site.urls),
    # The admins' webhooks page (webhooks/views.py); before the dashboard's catch-all routes.
    path("webhooks/", include("webhooks.dashboard_urls")),
    path("", include("dashboard.urls")),
]
