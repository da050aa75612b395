"""``POST /api/v1/checkpoints/{uuid}/metadata/``: add user metadata to a stored checkpoint."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action

from headway.client import _wire as wire
from registry.api.answers import answer
from registry.api.permissions import trial_run_of
from registry.authz import ensure_can_write_trial_data
from registry.checkpoints.metadata import checkpoint_add_metadata
from registry.jsonsafe import json_storage_problem
from registry.models import Checkpoint


class CheckpointMetadataSerializer(serializers.Serializer):
    """``{"metadata": {...}}``: top-level keys to add to (or replace in) the checkpoint's."""

    metadata = serializers.DictField(
        allow_empty=False,
        help_text=(
            "JSON object; each top-level key is added to the checkpoint's metadata or replaces "
            "the key there. The merged metadata may be at most "
            "HEADWAY_MAX_CHECKPOINT_METADATA_BYTES (64 KiB) as JSON (413 beyond); "
            "steps_completed cannot be changed."
        ),
    )

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        """Storable as JSON on every database (no NaN / infinity / NUL)."""
        problem = json_storage_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


class CheckpointMetadataMixin:
    """``add_metadata``: the checkpoint's trial's own run token or the experiment's owner merges
    keys into its metadata (Determined's ``Checkpoint.add_metadata``); answers the checkpoint's
    whole metadata. 400 names the field, 403 for anyone else, 404 for an unknown checkpoint.
    """

    @extend_schema(
        request=CheckpointMetadataSerializer,
        responses={200: wire.CheckpointMetadataMerged},
        examples=[
            OpenApiExample(
                "add two keys",
                value={"metadata": {"dataset": "digits-v2", "tags": ["baseline"]}},
                request_only=True,
            )
        ],
    )
    @action(detail=True, methods=["post"], url_path="metadata", url_name="metadata")
    def add_metadata(self, request, uuid=None):
        checkpoint = self.get_object()
        run = trial_run_of(request)
        ensure_can_write_trial_data(
            request.user, checkpoint.trial_id, run_trial_id=run.trial_id if run else None
        )
        data = CheckpointMetadataSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            checkpoint = checkpoint_add_metadata(
                uuid=checkpoint.uuid, metadata=data.validated_data["metadata"]
            )
        except Checkpoint.DoesNotExist:
            raise Http404("No Checkpoint matches the given query.") from None
        return answer(
            wire.CheckpointMetadataMerged,
            {"uuid": str(checkpoint.uuid), "metadata": checkpoint.metadata},
        )
