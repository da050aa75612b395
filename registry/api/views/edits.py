"""``PATCH experiments/{id}/`` and ``PATCH trials/{id}/``: edit name, description, labels, notes.

Mixed into ``ExperimentViewSet`` and ``TrialViewSet``. Owner or admin only (403 before any 400
about the body, as the model registry's PATCHes); trial tokens never (their viewsets do not
list ``partial_update`` in ``allow_trial_token``). The change goes through
``registry.lifecycle.experiment_patch`` / ``trial_patch``, which the dashboard's edit forms call
too.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from registry import lifecycle
from registry.api.serializers import (
    ExperimentPatchSerializer,
    ExperimentSerializer,
    TrialPatchSerializer,
    TrialSerializer,
)
from registry.authz import ensure_can_change_experiment, ensure_can_change_trial


class ExperimentPatchMixin:
    """``partial_update`` for ``ExperimentViewSet`` (needs its ``get_object``/``get_queryset``)."""

    @extend_schema(request=ExperimentPatchSerializer, responses=ExperimentSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Replace any of ``name``, ``description``, ``labels``, ``notes``; owner or admin."""
        experiment = self.get_object()  # type: ignore[attr-defined]
        ensure_can_change_experiment(request.user, experiment.id)
        data = ExperimentPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        lifecycle.experiment_patch(experiment_id=experiment.id, **data.validated_data)
        fresh = self.get_queryset().get(id=experiment.id)  # type: ignore[attr-defined]
        return Response(ExperimentSerializer(fresh).data)


class TrialPatchMixin:
    """``partial_update`` for ``TrialViewSet`` (needs its ``get_object``/``get_queryset``)."""

    @extend_schema(request=TrialPatchSerializer, responses=TrialSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Replace the trial's ``notes`` (Markdown); the experiment's owner or an admin."""
        trial = self.get_object()  # type: ignore[attr-defined]
        ensure_can_change_trial(request.user, trial.id)
        data = TrialPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        lifecycle.trial_patch(trial_id=trial.id, **data.validated_data)
        fresh = self.get_queryset().get(id=trial.id)  # type: ignore[attr-defined]
        return Response(TrialSerializer(fresh).data)
