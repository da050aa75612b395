"""Edit views: model description / labels, model version comment / labels.

Each is ``GET`` (a page with the form, for a direct link or a browser without ``<details>``) and
``POST`` (CSRF-protected). Only the owner or an admin may use them (``registry.authz``, the rule
of the REST API): anyone else gets 403, and the pages do not show them the edit controls. A POST
calls the same service as the REST API's PATCH (``registry.model_registry.model_update`` / ``version_update``). On success it
redirects to the form's ``next`` (see ``dashboard.views._common.back``) with a note; on bad input it
answers 400 with the form again, the typed values kept and each error on the field it names,
nothing saved. No script is needed: the forms sit in ``<details>`` boxes on the pages.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.views.decorators.http import require_http_methods

from dashboard.edit_forms import (
    ModelEditForm,
    VersionEditForm,
)
from dashboard.templatetags.edit_tags import label_line
from dashboard.views._common import edit_page, ensure_owner
from registry import model_registry as svc
from registry.models import RegisteredModel


def _model(request: HttpRequest, name: str) -> RegisteredModel:
    try:
        model = svc.get_model(name)
    except svc.ModelNotFound as exc:
        raise Http404(exc.detail) from None
    ensure_owner(request.user, model.owner_id, f"model {model.name!r}")
    return model


@require_http_methods(["GET", "POST"])
@login_required
def model_edit(request: HttpRequest, name: str) -> HttpResponse:
    """``/models/<name>/edit``: the model's description and labels."""
    model = _model(request, name)
    return edit_page(
        request,
        form_class=ModelEditForm,
        initial={"description": model.description, "labels": label_line(model.labels)},
        save=lambda values: svc.model_update(model=model, user=request.user, **values),
        title=f"Edit model {model.name}",
        done=f"Model {model.name} saved",
        back_to=resolve_url("dashboard:model", model.name),
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
    return edit_page(
        request,
        form_class=VersionEditForm,
        initial={"comment": found.comment, "labels": label_line(found.labels)},
        save=lambda values: svc.version_update(version=found, user=request.user, **values),
        title=f"Edit {model.name} version {found.version}",
        done=f"{model.name} version {found.version} saved",
        back_to=resolve_url("dashboard:model", model.name) + f"#version-{found.version}",
    )
