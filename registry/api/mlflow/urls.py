"""Routes of the MLflow-compatible API, under ``/api/2.0/`` (config/urls.py)."""

from django.urls import path

from registry.api.mlflow.artifacts import ArtifactFileView, ArtifactListView
from registry.api.mlflow.views import MlflowServiceView

app_name = "mlflow-api"

urlpatterns = [
    path("mlflow-artifacts/artifacts", ArtifactListView.as_view(), name="artifact-list"),
    path(
        "mlflow-artifacts/artifacts/<path:artifact_path>",
        ArtifactFileView.as_view(),
        name="artifact-file",
    ),
    path("mlflow/<path:endpoint>", MlflowServiceView.as_view(), name="service"),
]
