"""Edits of what people write about experiments and trials: name, description, labels, notes.

Determined's ``PatchExperiment``: the REST API (``PATCH experiments/{id}/``, ``trials/{id}/``)
and the dashboard's edit forms call these after ``registry.authz`` allowed the user (owner or
admin). Values are checked with ``registry.user_text`` (the one set of rules), then written
with one conditional UPDATE, so an edit never touches a state field a racing transition owns.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from registry.errors import IllegalTransition
from registry.models import Experiment, Trial
from registry.user_text import (
    DESCRIPTION_MAX,
    NOTES_MAX,
    check_fields,
    validate_labels,
    validate_name,
    validate_text,
)


def experiment_patch(
    *,
    experiment_id: int,
    name: str | None = None,
    description: str | None = None,
    labels: list[str] | None = None,
    notes: str | None = None,
) -> Experiment:
    """Replace the given fields of the experiment (None leaves a field as it is); return it.

    ``labels`` replaces the whole list (duplicates dropped). Limits: ``registry.user_text``.

    Raises:
        Http404: no such experiment.
        InvalidInput: ``{field: [why]}`` for every bad field; nothing is written then.
        IllegalTransition: (409) the experiment is being deleted.
    """
    checks: dict[str, Any] = {}
    if name is not None:
        checks["name"] = lambda: validate_name(name)
    if description is not None:
        checks["description"] = lambda: validate_text(description, "description", DESCRIPTION_MAX)
    if labels is not None:
        checks["labels"] = lambda: validate_labels(labels)
    if notes is not None:
        checks["notes"] = lambda: validate_text(notes, "notes", NOTES_MAX)
    changes = check_fields(checks)
    experiment = get_object_or_404(Experiment.objects.without_blobs(), id=experiment_id)
    _write(
        experiment,
        # Experiments on their way out take no edits (their rows are about to go).
        Experiment.objects.filter(id=experiment_id).not_deleted(),
        changes,
        gone=f"experiment {experiment_id} is being deleted",
    )
    return experiment


def trial_patch(*, trial_id: int, notes: str | None = None) -> Trial:
    """Replace the trial's ``notes`` (Markdown; None leaves them); return the trial.

    Raises:
        Http404: no such trial.
        InvalidInput: ``{"notes": [why]}``; nothing is written then.
        IllegalTransition: (409) its experiment is being deleted.
    """
    changes = check_fields(
        {"notes": lambda: validate_text(notes, "notes", NOTES_MAX)} if notes is not None else {}
    )
    trial = get_object_or_404(Trial.objects.select_related("experiment"), id=trial_id)
    _write(
        trial,
        Trial.objects.filter(id=trial_id).not_deleted(),
        changes,
        gone=f"trial {trial_id}'s experiment is being deleted",
    )
    return trial


def _write(obj: Any, live: QuerySet[Any], changes: dict[str, Any], *, gone: str) -> None:
    """One conditional UPDATE of ``live`` (the object's row unless it is going away), then the
    loaded ``obj`` updated to match. Raises IllegalTransition(``gone``) when no row matched."""
    if not changes:
        return
    if not live.update(**changes):
        raise IllegalTransition(gone)
    for key, value in changes.items():
        setattr(obj, key, value)
