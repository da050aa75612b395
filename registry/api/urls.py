"""Routes of ``/api/v1/``."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from registry.api import views
from registry.model_registry import MODEL_NAME_PATTERN

app_name = "registry-api"

router = DefaultRouter()
# Accept both `checkpoints/{uuid}/download` and the trailing-slash form (regex routes).
router.trailing_slash = "/?"
router.register("experiments", views.ExperimentViewSet, basename="experiment")
router.register("trials", views.TrialViewSet, basename="trial")
router.register("checkpoints", views.CheckpointViewSet, basename="checkpoint")
router.register("workers", views.WorkerHostViewSet, basename="worker")
router.register("models", views.RegisteredModelViewSet, basename="model")
router.register(
    rf"models/(?P<model_name>{MODEL_NAME_PATTERN})/versions",
    views.ModelVersionViewSet,
    basename="model-version",
)

urlpatterns = [
    path("auth/login/", views.LoginView.as_view(), name="login"),
    path("trials/<int:pk>/metrics.csv", views.TrialMetricsCSV.as_view(), name="trial-metrics-csv"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "schema/ui/",
        # The split view serves its start-up script as a file (`?script=`): no inline script,
        # so the page passes the Content-Security-Policy.
        SpectacularSwaggerSplitView.as_view(url_name="registry-api:schema"),
        name="schema-ui",
    ),
    path("", include(router.urls)),
]
