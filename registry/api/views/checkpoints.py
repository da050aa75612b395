"""``/api/v1/checkpoints/{uuid}/``: metadata; downloads live in :mod:`.checkpoint_download`."""

from rest_framework import mixins, viewsets

from registry.api.serializers import CheckpointSerializer
from registry.api.views.checkpoint_delete import CheckpointDeleteMixin
from registry.api.views.checkpoint_download import CheckpointDownloadMixin
from registry.api.views.checkpoint_metadata import CheckpointMetadataMixin
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
