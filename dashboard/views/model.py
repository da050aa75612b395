"""One model's page (``/models/<name>/``): its fields and versions, and its owner's controls
(archive, delete a version) and edit forms (description / labels, a version's comment / labels).

Every control is a POST with CSRF that calls one ``registry.model_registry`` service and reports
the outcome with a ``messages`` note on the page it redirects to; only who may change the model
(``registry.authz``: its owner as an editor of its workspace, the workspace's admins, site
admins) may use them, and the page does not show them to anyone else. A model in a workspace
where the user has no role is a 404 on every page and control.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard.edit_forms import ModelEditForm, VersionEditForm
from dashboard.selectors import CHECKPOINT_DOWNLOAD_URL
from dashboard.templatetags.edit_tags import label_line
from dashboard.views._common import edit_page, ensure_owner
from dashboard.views.models import ROWS_PER_PAGE
from registry import authz
from registry import model_registry as svc
from registry.errors import RegistryError
from registry.models import ModelVersion, RegisteredModel


@require_GET
@login_required
def model_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One model: fields, and its versions newest first (``?page=``) with each checkpoint's
    trial link, size and download link. Raises ``Http404`` for an unknown name."""
    try:
        obj = svc.get_model(name, user=request.user)
    except svc.ModelNotFound as exc:
        raise Http404(exc.detail) from None
    versions = (
        ModelVersion.objects.filter(model=obj)
        .select_related("owner", "checkpoint__trial")
        .prefetch_related("aliases")
        .order_by("-version")
    )
    page = Paginator(versions, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    for version in page:
        version.download_url = CHECKPOINT_DOWNLOAD_URL.format(uuid=version.checkpoint_id)  # type: ignore[attr-defined]
    can_modify = authz.can_change(request.user, obj.owner_id, obj.workspace_id)
    context = {"model": obj, "page": page, "can_modify": can_modify}
    return render(request, "dashboard/model.html", context)


@require_POST
@login_required
def model_archive(request: HttpRequest, name: str) -> HttpResponse:
    """``POST /models/<name>/archive`` with ``archived=true|false``: archive or unarchive."""
    archived = request.POST.get("archived")
    if archived not in ("true", "false"):
        messages.error(request, "archived: must be true or false.")
        return redirect("dashboard:model", name)
    model = _readable_model(request, name)
    try:
        obj = svc.model_update(model=model, user=request.user, archived=archived == "true")
    except RegistryError as exc:
        messages.error(request, exc.detail)
        return redirect("dashboard:models")
    messages.success(request, f"Model {obj.name} {'archived' if obj.archived else 'unarchived'}")
    return redirect("dashboard:model", obj.name)


@require_POST
@login_required
def model_version_delete(request: HttpRequest, name: str, version: int) -> HttpResponse:
    """``POST /models/<name>/versions/<n>/delete``: delete the version (frees its checkpoint)."""
    model = _readable_model(request, name)
    try:
        found = svc.get_version(model, version)
        svc.version_delete(version=found, user=request.user)
    except RegistryError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Deleted {name} version {version}")
    return redirect("dashboard:model", name)


def _readable_model(request: HttpRequest, name: str) -> RegisteredModel:
    """The model, or ``Http404`` when it is unknown or in a workspace without the user's role."""
    try:
        return svc.get_model(name, user=request.user)
    except svc.ModelNotFound as exc:
        raise Http404(exc.detail) from None


def _owned_model(request: HttpRequest, name: str) -> RegisteredModel:
    model = _readable_model(request, name)
    ensure_owner(request.user, model.owner_id, f"model {model.name!r}", model.workspace_id)
    return model


@require_http_methods(["GET", "POST"])
@login_required
def model_edit(request: HttpRequest, name: str) -> HttpResponse:
    """``/models/<name>/edit``: the model's description and labels, through
    ``registry.model_registry.model_update`` (the REST API's PATCH); see ``_common.edit_page``."""
    model = _owned_model(request, name)
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
def model_version_edit(request: HttpRequest, name: str, version: int) -> HttpResponse:
    """``/models/<name>/versions/<n>/edit``: the version's comment and labels, through
    ``registry.model_registry.version_update``; see ``_common.edit_page``."""
    model = _owned_model(request, name)
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
