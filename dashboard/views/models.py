"""The model registry's list page (``/models/``): the models of the workspaces where the user has
a role, the create form (into a workspace where the user is an editor), and the "Register as
model" action of the trial page's checkpoints (``POST /models/register``).

Every page requires login; every control is a POST with CSRF that calls one
``registry.model_registry`` service and reports the outcome with a ``messages`` note on the page
it redirects to. Each page runs a fixed number of queries.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from dashboard.model_forms import CreateModelForm, RegisterVersionForm
from dashboard.views._common import back
from registry import authz
from registry import model_registry as svc
from registry.authz import scoped
from registry.errors import RegistryError
from registry.models import Checkpoint, RegisteredModel, Workspace

ROWS_PER_PAGE = 100


@require_GET
@login_required
def model_list(request: HttpRequest) -> HttpResponse:
    """The models the user may read by name, with their workspace, version count and latest
    version; archived ones only with ``?archived=on``. Queries: session, user, the user's roles
    (two), count, one page, the workspaces of the create form."""
    show_archived = request.GET.get("archived") == "on"
    qs = (
        scoped(RegisteredModel.objects, request.user)
        .select_related("owner", "workspace")
        .annotate(num_versions=Count("versions"), latest_version=Max("versions__version"))
    )
    if not show_archived:
        qs = qs.filter(archived=False)
    page = Paginator(qs.order_by("name"), ROWS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "show_archived": show_archived,
        "form": CreateModelForm(),
        "workspaces": creatable_workspaces(request.user),
    }
    return render(request, "dashboard/models.html", context)


@require_POST
@login_required
def model_create(request: HttpRequest) -> HttpResponse:
    """``POST /models/create``: create a model owned by the user in the form's ``workspace``
    (an id; empty: the default workspace); to its page, or back to the list with the error."""
    form = CreateModelForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Model not created: {form.error_text()}")
        return redirect("dashboard:models")
    try:
        model = svc.model_create(
            owner=request.user,
            name=form.cleaned_data["name"],
            workspace=form.cleaned_data["workspace"],
            description=form.cleaned_data["description"],
        )
    except RegistryError as exc:
        messages.error(request, f"Model not created: {exc.detail}")
        return redirect("dashboard:models")
    messages.success(request, f"Model {model.name} created")
    return redirect("dashboard:model", model.name)


@require_POST
@login_required
def model_version_register(request: HttpRequest) -> HttpResponse:
    """``POST /models/register``: the trial page's "Register as model" form.

    Fields: ``checkpoint`` (uuid), ``model`` (a model name; when no model the user may read has
    it, one is created, owned by the user, in the workspace of the checkpoint's experiment:
    registering needs the right to change that experiment, so the user may create there),
    ``next`` (the page to return to; see ``_common.back``).
    Returns there with ``Registered checkpoint … as <model> version <n>`` or the refusal.
    """
    form = RegisterVersionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Checkpoint not registered: {form.error_text()}")
        return back(request, "dashboard:models")
    name = form.cleaned_data["model"]
    uuid = form.cleaned_data["checkpoint"]
    try:
        # A model created here is rolled back when the registration is refused.
        with transaction.atomic():
            try:
                target = svc.get_model(name, user=request.user)
            except svc.ModelNotFound:
                target = svc.model_create(
                    owner=request.user, name=name, workspace=_checkpoint_workspace(request, uuid)
                )
            version = svc.version_register(model=target, user=request.user, checkpoint_uuid=uuid)
    except RegistryError as exc:
        messages.error(request, f"Checkpoint not registered: {_first_error(exc)}")
        return back(request, "dashboard:models")
    messages.success(request, f"Registered checkpoint {uuid} as {name} version {version.version}")
    return back(request, "dashboard:model", name)


def _checkpoint_workspace(request: HttpRequest, uuid: Any) -> int | None:
    """The workspace id of checkpoint ``uuid``'s experiment when the user may read it; None
    otherwise (then the default workspace, and ``version_register`` answers for the checkpoint
    itself, so a hidden checkpoint's workspace is never named)."""
    return (
        scoped(Checkpoint.objects, request.user)
        .filter(uuid=uuid)
        .values_list("trial__experiment__project__workspace_id", flat=True)
        .first()
    )


def _first_error(exc: RegistryError) -> str:
    for messages_ in exc.errors.values():
        if messages_:
            return messages_[0]
    return exc.detail


def creatable_workspaces(user: object) -> list[tuple[int, str]]:
    """``(id, name)`` of the open workspaces where ``user`` may create models (editor or
    admin), by name, the default workspace first: the create form's choices."""
    rows = (
        scoped(Workspace.objects, user)
        .filter(archived=False)
        .order_by("-immutable", "name")
        .values_list("id", "name")
    )
    return [(wid, name) for wid, name in rows if authz.may_create_in(user, wid)]
