"""``/api/v1/checkpoints/{uuid}/``: metadata; downloads live in :mod:`.checkpoint_download`."""

from rest_framework import mixins, viewsets

from registry.api.serializers import CheckpointSerializer
from registry.api.views.checkpoint_delete import CheckpointDeleteMixin
from registry.api.views.checkpoint_download import CheckpointDownloadMixin
from registry.models import Checkpoint


class CheckpointViewSet(
    CheckpointDownloadMixin,
    CheckpointDeleteMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = CheckpointSerializer
    queryset = Checkpoint.objects.select_related("trial")
    lookup_field = "uuid"
    # Trial processes read checkpoints to restore or warm-start from them.
    allow_trial_token = ("retrieve", "download")
