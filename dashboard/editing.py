"""Edit views: experiment name / description / labels, experiment and trial notes, model
description / labels, model version comment / labels.

Each is ``GET`` (a page with the form, for a direct link or a browser without ``<details>``) and
``POST`` (CSRF-protected). Only the owner or an admin may use them (``registry.authz``, the rule
of the REST API): anyone else gets 403, and the pages do not show them the edit controls. A POST
calls the same service as the REST API's PATCH (``registry.lifecycle.experiment_patch``,
``trial_patch``, ``registry.model_registry.model_update`` / ``version_update``). On success it
redirects to the form's ``next`` (see ``dashboard.controls._back``) with a note; on bad input it
answers 400 with the form again, the typed values kept and each error on the field it names,
nothing saved. No script is needed: the forms sit in ``<details>`` boxes on the pages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render, resolve_url
from django.views.decorators.http import require_http_methods

from dashboard.controls import _back
from dashboard.edit_forms import (
    EditForm,
    ExperimentEditForm,
    ModelEditForm,
    NotesForm,
    VersionEditForm,
)
from dashboard.templatetags.edit_tags import label_line
from registry import authz, lifecycle
from registry import model_registry as svc
from registry.errors import InvalidInput, RegistryError
from registry.models import Experiment, RegisteredModel, Trial

PAGE = "dashboard/_edit_page.html"


def _edit(
    request: HttpRequest,
    *,
    form_class: type[EditForm],
    initial: dict[str, Any],
    save: Callable[[dict[str, Any]], object],
    title: str,
    done: str,
    back: str,
) -> HttpResponse:
    """The shared GET / POST flow of every edit view (the user is already allowed).

    Arguments:
        save: calls the service with the form's cleaned values; raises its errors.
        done: the success note. back: the object's page (the default ``next``).
    """
    if request.method == "POST":
        form = form_class(request.POST)
        if form.is_valid():
            try:
                save(form.changes())
            except InvalidInput as exc:
                form.add_service_errors(exc)
            except RegistryError as exc:  # e.g. 409: the experiment is being deleted
                messages.error(request, exc.detail)
                return _back(request, back)
            else:
                messages.success(request, done)
                return _back(request, back)
    else:
        form = form_class(initial=initial)
    context = {
        "form": form,
        "title": title,
        "action": request.path,
        "next_path": request.POST.get("next") or request.GET.get("next") or back,
        "back": back,
    }
    return render(request, PAGE, context, status=400 if request.method == "POST" else 200)


def _allowed(user: Any, owner_id: int | None, what: str) -> None:
    """403 (Django's ``PermissionDenied``) unless the user owns the object or is an admin."""
    try:
        authz.ensure_can_change(user, owner_id, what)
    except authz.NotPermitted as exc:
        raise PermissionDenied(exc.detail) from None


def _experiment(request: HttpRequest, experiment_id: int) -> Experiment:
    experiment = get_object_or_404(
        Experiment.objects.defer("model_definition", "config", "searcher_state"), id=experiment_id
    )
    _allowed(request.user, experiment.owner_id, f"experiment {experiment.id}")
    return experiment


@require_http_methods(["GET", "POST"])
@login_required
def experiment_edit(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """``/experiments/<id>/edit``: name, description, labels (comma-separated)."""
    experiment = _experiment(request, experiment_id)
    return _edit(
        request,
        form_class=ExperimentEditForm,
        initial={
            "name": experiment.name,
            "description": experiment.description,
            "labels": label_line(experiment.labels),
        },
        save=lambda values: lifecycle.experiment_patch(experiment_id=experiment.id, **values),
        title=f"Edit experiment {experiment.id}",
        done=f"Experiment {experiment.id} saved",
        back=resolve_url("dashboard:experiment", experiment.id),
    )


@require_http_methods(["GET", "POST"])
@login_required
def experiment_notes(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """``/experiments/<id>/notes``: the experiment's Markdown notes."""
    experiment = _experiment(request, experiment_id)
    return _edit(
        request,
        form_class=NotesForm,
        initial={"notes": experiment.notes},
        save=lambda values: lifecycle.experiment_patch(experiment_id=experiment.id, **values),
        title=f"Notes of experiment {experiment.id}",
        done=f"Notes of experiment {experiment.id} saved",
        back=resolve_url("dashboard:experiment", experiment.id) + "#notes",
    )


@require_http_methods(["GET", "POST"])
@login_required
def trial_notes(request: HttpRequest, trial_id: int) -> HttpResponse:
    """``/trials/<id>/notes``: the trial's Markdown notes (its experiment's owner or an admin)."""
    trial = get_object_or_404(
        Trial.objects.only("id", "notes", "experiment__owner_id").select_related("experiment"),
        id=trial_id,
    )
    _allowed(request.user, trial.experiment.owner_id, f"trial {trial.id}")
    return _edit(
        request,
        form_class=NotesForm,
        initial={"notes": trial.notes},
        save=lambda values: lifecycle.trial_patch(trial_id=trial.id, **values),
        title=f"Notes of trial {trial.id}",
        done=f"Notes of trial {trial.id} saved",
        back=resolve_url("dashboard:trial", trial.id) + "#notes",
    )


def _model(request: HttpRequest, name: str) -> RegisteredModel:
    try:
        model = svc.get_model(name)
    except svc.ModelNotFound as exc:
        raise Http404(exc.detail) from None
    _allowed(request.user, model.owner_id, f"model {model.name!r}")
    return model


@require_http_methods(["GET", "POST"])
@login_required
def model_edit(request: HttpRequest, name: str) -> HttpResponse:
    """``/models/<name>/edit``: the model's description and labels."""
    model = _model(request, name)
    return _edit(
        request,
        form_class=ModelEditForm,
        initial={"description": model.description, "labels": label_line(model.labels)},
        save=lambda values: svc.model_update(model=model, user=request.user, **values),
        title=f"Edit model {model.name}",
        done=f"Model {model.name} saved",
        back=resolve_url("dashboard:model", model.name),
    )


@require_http_methods(["GET", "POST"])
@login_required
def version_edit(request: HttpRequest, name: str, version: int) -> HttpResponse:
    """``/models/<name>/versions/<n>/edit``: the version's comment and labels."""
    model = _model(request, name)
    try:
        found = svc.get_version(model, version)
    except svc.ModelNotFound as exc:
        raise Http404(exc.detail) from None
    return _edit(
        request,
        form_class=VersionEditForm,
        initial={"comment": found.comment, "labels": label_line(found.labels)},
        save=lambda values: svc.version_update(version=found, user=request.user, **values),
        title=f"Edit {model.name} version {found.version}",
        done=f"{model.name} version {found.version} saved",
        back=resolve_url("dashboard:model", model.name) + f"#version-{found.version}",
    )
