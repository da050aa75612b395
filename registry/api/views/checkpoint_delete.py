"""``DELETE /api/v1/checkpoints/{uuid}/``: remove a checkpoint's files, keep its DELETED row."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from registry.authz import ensure_can_change_experiment
from registry.lifecycle import checkpoint_delete
from registry.models import Checkpoint


class CheckpointDeleteMixin:
    """``destroy``: the experiment's owner (or staff) deletes a checkpoint's files now.

    204 when the files are gone (also for an already DELETED checkpoint); 409 when a model
    version holds it, or it is the latest checkpoint (or warm-start source) of a trial that has
    not ended; 502 when storage failed (the checkpoint is DELETE_FAILED; GC retries).
    """

    @extend_schema(responses={204: None})
    def destroy(self, request, uuid=None):
        checkpoint = self.get_object()
        experiment_id = checkpoint.trial.experiment_id
        ensure_can_change_experiment(request.user, experiment_id)
        try:
            checkpoint_delete(uuid=checkpoint.uuid, user=request.user)
        except Checkpoint.DoesNotExist:
            raise Http404("No Checkpoint matches the given query.") from None
        return Response(status=status.HTTP_204_NO_CONTENT)
