"""Routes of ``/api/v1/``."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

import registry.path_converters  # noqa: F401 (registers the <db_id:...> converter)
from registry.api import views
from registry.api.views import host_agent, host_tokens, hosts, resource_pools
from registry.api.views.health import HealthView
from registry.api.views.unmanaged import (
    UnmanagedExitView,
    UnmanagedHeartbeatView,
    UnmanagedLogsView,
    UnmanagedStartView,
)
from registry.api.views.unmanaged_checkpoints import UnmanagedCheckpointFileView
from registry.model_registry import MODEL_NAME_PATTERN

app_name = "registry-api"

router = DefaultRouter()
# Accept both `checkpoints/{uuid}/download` and the trailing-slash form (regex routes).
router.trailing_slash = "/?"
# Trials first: a route is found by trying each pattern in order, and a trial's metric reports
# are the hottest requests (the experiments' 26 patterns were tried and failed before each one).
router.register("trials", views.TrialViewSet, basename="trial")
router.register("experiments", views.ExperimentViewSet, basename="experiment")
router.register("checkpoints", views.CheckpointViewSet, basename="checkpoint")
router.register("workers", views.WorkerHostViewSet, basename="worker")
router.register("resource-pools", views.ResourcePoolViewSet, basename="resource-pool")
router.register("models", views.RegisteredModelViewSet, basename="model")
router.register("workspaces", views.WorkspaceViewSet, basename="workspace")
router.register("projects", views.ProjectViewSet, basename="project")
router.register(
    rf"models/(?P<model_name>{MODEL_NAME_PATTERN})/versions",
    views.ModelVersionViewSet,
    basename="model-version",
)
router.register(
    rf"models/(?P<model_name>{MODEL_NAME_PATTERN})/aliases",
    views.ModelAliasViewSet,
    basename="model-alias",
)

host_token_urls = [
    path("host-tokens/", host_tokens.HostTokenListView.as_view(), name="host-token-list"),
    path(
        "host-tokens/<str:name>/",
        host_tokens.HostTokenDetailView.as_view(),
        name="host-token-detail",
    ),
    path("webhooks/", include("webhooks.urls")),  # admins' webhooks (webhooks/api.py)
    # The admin's host operations (registry/api/views/hosts.py).
    path("hosts/", hosts.HostListView.as_view(), name="admin-host-list"),
    path("hosts/<str:name>/", hosts.HostDetailView.as_view(), name="admin-host-detail"),
    path("hosts/<str:name>/disable/", hosts.HostDisableView.as_view(), name="admin-host-disable"),
    path("hosts/<str:name>/enable/", hosts.HostEnableView.as_view(), name="admin-host-enable"),
    path(
        "resource-pools/<str:pool>/nodes/<str:node>/enable/",
        resource_pools.PoolNodeEnableView.as_view(),
        name="resource-pool-node-enable",
    ),
]

urlpatterns = [
    # Behind one prefix: any other request is refused by one match here, not one per route.
    # Worker hosts' routes (host tokens only; declared in registry/api/views/host_agent.py).
    path("host-agent/", include(host_agent.urlpatterns)),
    *host_token_urls,
    path("auth/login/", views.LoginView.as_view(), name="login"),
    path("health/", HealthView.as_view(), name="health"),
    path(
        "trials/<db_id:pk>/metrics.csv", views.TrialMetricsCSV.as_view(), name="trial-metrics-csv"
    ),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Runs a script starts itself (headway.experimental.core_v2).
    path("unmanaged/", UnmanagedStartView.as_view(), name="unmanaged-start"),
    path(
        "unmanaged/trials/<db_id:trial_id>/runs/<db_id:run_id>/heartbeat/",
        UnmanagedHeartbeatView.as_view(),
        name="unmanaged-heartbeat",
    ),
    path(
        "unmanaged/trials/<db_id:trial_id>/runs/<db_id:run_id>/logs/",
        UnmanagedLogsView.as_view(),
        name="unmanaged-logs",
    ),
    path(
        "unmanaged/trials/<db_id:trial_id>/runs/<db_id:run_id>/checkpoints/<str:storage_id>/files/",
        UnmanagedCheckpointFileView.as_view(),
        name="unmanaged-checkpoint-file",
    ),
    path(
        "unmanaged/trials/<db_id:trial_id>/runs/<db_id:run_id>/exit/",
        UnmanagedExitView.as_view(),
        name="unmanaged-exit",
    ),
    path(
        "schema/ui/",
        # The split view serves its start-up script as a file (`?script=`): no inline script,
        # so the page passes the Content-Security-Policy.
        SpectacularSwaggerSplitView.as_view(url_name="registry-api:schema"),
        name="schema-ui",
    ),
    # A model name never holds "@", so this cannot shadow the model routes.
    re_path(
        rf"^models/(?P<model_name>{MODEL_NAME_PATTERN})@(?P<alias>[^/]+)/?$",
        views.ModelAliasResolveView.as_view(),
        name="model-alias-resolve",
    ),
    path("", include(router.urls)),
]
