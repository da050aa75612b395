"""``/api/v1/checkpoints/{uuid}/``: metadata; downloads live in :mod:`.checkpoint_download`."""

from django.db.models import Q
from rest_framework import mixins, viewsets

from registry.api.permissions import trial_run_of
from registry.api.serializers import CheckpointSerializer
from registry.api.views.checkpoint_delete import CheckpointDeleteMixin
from registry.api.views.checkpoint_download import CheckpointDownloadMixin
from registry.api.views.checkpoint_metadata import CheckpointMetadataMixin
from registry.authz import WORKSPACE_PATHS, is_admin, readable_workspaces
from registry.models import Checkpoint


class CheckpointViewSet(
    CheckpointDownloadMixin,
    CheckpointDeleteMixin,
    CheckpointMetadataMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = CheckpointSerializer
    queryset = Checkpoint.objects.select_related("trial")
    lookup_field = "uuid"
    # Trial processes read checkpoints to restore or warm-start from them, and add metadata to
    # their own trial's (add_metadata checks the trial).
    allow_trial_token = ("retrieve", "download", "add_metadata")

    def get_queryset(self):
        # The workspaces the user (a run token's: the experiment's owner) has a role in, and a
        # run's own trial's checkpoints whatever its owner's roles are now.
        queryset = super().get_queryset()
        readable = Q(
            **{f"{WORKSPACE_PATHS['Checkpoint']}__in": readable_workspaces(self.request.user)}
        )
        if is_admin(self.request.user):
            return queryset
        run = trial_run_of(self.request)
        if run is not None:
            readable |= Q(trial_id=run.trial_id)
        return queryset.filter(readable)
