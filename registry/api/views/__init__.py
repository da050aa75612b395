"""REST viewsets, one module per resource."""

from registry.api.views.auth import LoginView
from registry.api.views.checkpoints import CheckpointViewSet
from registry.api.views.experiments import ExperimentViewSet
from registry.api.views.metrics import TrialMetricsCSV
from registry.api.views.model_aliases import ModelAliasResolveView, ModelAliasViewSet
from registry.api.views.models import ModelVersionViewSet, RegisteredModelViewSet
from registry.api.views.resource_pools import ResourcePoolViewSet
from registry.api.views.trials import TrialViewSet
from registry.api.views.workers import WorkerHostViewSet
from registry.api.views.workspaces import ProjectViewSet, WorkspaceViewSet

__all__ = [
    "CheckpointViewSet",
    "ExperimentViewSet",
    "LoginView",
    "ModelAliasResolveView",
    "ModelAliasViewSet",
    "ModelVersionViewSet",
    "ProjectViewSet",
    "RegisteredModelViewSet",
    "ResourcePoolViewSet",
    "TrialMetricsCSV",
    "TrialViewSet",
    "WorkerHostViewSet",
    "WorkspaceViewSet",
]
