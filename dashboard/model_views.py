"""The model registry's pages: ``/models/`` (list, create form), ``/models/<name>/`` (versions,
owner controls), and the "Register as model" action of the trial page's checkpoints.

Every page requires login; every control is a POST with CSRF that calls one
``registry.model_registry`` service and reports the outcome with a ``messages`` note on the page
it redirects to (as ``dashboard.controls`` does). Each page runs a fixed number of queries.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from dashboard.selectors import CHECKPOINT_DOWNLOAD_URL
from dashboard.views._common import back
from registry import authz
from registry import model_registry as svc
from registry.errors import InvalidInput, RegistryError
from registry.models import ModelVersion, RegisteredModel

ROWS_PER_PAGE = 100


class ModelNameField(forms.CharField):
    """A model name, checked with the registry's own rule (``validate_model_name``)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=svc.MODEL_NAME_MAX, strip=True, **kwargs)

    def validate(self, value: str) -> None:
        super().validate(value)
        try:
            svc.validate_model_name(value)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.errors["name"][0]) from None


class _Form(forms.Form):
    def error_text(self) -> str:
        """Every field error on one line: ``model: Use letters, ...``."""
        return "; ".join(
            f"{name}: {error}" for name, errors in self.errors.items() for error in errors
        )


class CreateModelForm(_Form):
    name = ModelNameField()
    description = forms.CharField(required=False, widget=forms.Textarea)


class RegisterVersionForm(_Form):
    """``checkpoint`` (uuid) to register into ``model``: an existing model the user may change,
    or a new name (then created, owned by the user)."""

    checkpoint = forms.UUIDField()
    model = ModelNameField()


@require_GET
@login_required
def models(request: HttpRequest) -> HttpResponse:
    """Every model by name, with its version count and latest version; archived ones only with
    ``?archived=on``. Queries: session, user, count, one page."""
    show_archived = request.GET.get("archived") == "on"
    qs = RegisteredModel.objects.select_related("owner").annotate(
        num_versions=Count("versions"), latest_version=Max("versions__version")
    )
    if not show_archived:
        qs = qs.filter(archived=False)
    page = Paginator(qs.order_by("name"), ROWS_PER_PAGE).get_page(request.GET.get("page"))
    context = {"page": page, "show_archived": show_archived, "form": CreateModelForm()}
    return render(request, "dashboard/models.html", context)


@require_POST
@login_required
def model_create(request: HttpRequest) -> HttpResponse:
    """``POST /models/create``: create a model owned by the user; to its page, or back to the
    list with the error."""
    form = CreateModelForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Model not created: {form.error_text()}")
        return redirect("dashboard:models")
    try:
        model = svc.model_create(
            owner=request.user,
            name=form.cleaned_data["name"],
            description=form.cleaned_data["description"],
        )
    except RegistryError as exc:
        messages.error(request, f"Model not created: {exc.detail}")
        return redirect("dashboard:models")
    messages.success(request, f"Model {model.name} created")
    return redirect("dashboard:model", model.name)


@require_GET
@login_required
def model(request: HttpRequest, name: str) -> HttpResponse:
    """One model: fields, and its versions newest first (``?page=``) with each checkpoint's
    trial link, size and download link. Raises ``Http404`` for an unknown name."""
    try:
        obj = svc.get_model(name)
    except svc.ModelNotFound as exc:
        raise Http404(exc.detail) from None
    versions = (
        ModelVersion.objects.filter(model=obj)
        .select_related("owner", "checkpoint__trial")
        .order_by("-version")
    )
    page = Paginator(versions, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    for version in page:
        version.download_url = CHECKPOINT_DOWNLOAD_URL.format(uuid=version.checkpoint_id)  # type: ignore[attr-defined]
    can_modify = authz.can_change(request.user, obj.owner_id)
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
    try:
        obj = svc.model_update(
            model=svc.get_model(name), user=request.user, archived=archived == "true"
        )
    except RegistryError as exc:
        messages.error(request, exc.detail)
        return redirect("dashboard:models")
    messages.success(request, f"Model {obj.name} {'archived' if obj.archived else 'unarchived'}")
    return redirect("dashboard:model", obj.name)


@require_POST
@login_required
def version_delete(request: HttpRequest, name: str, version: int) -> HttpResponse:
    """``POST /models/<name>/versions/<n>/delete``: delete the version (frees its checkpoint)."""
    try:
        found = svc.get_version(svc.get_model(name), version)
        svc.version_delete(version=found, user=request.user)
    except RegistryError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Deleted {name} version {version}")
    return redirect("dashboard:model", name)


@require_POST
@login_required
def register_version(request: HttpRequest) -> HttpResponse:
    """``POST /models/register``: the trial page's "Register as model" form.

    Fields: ``checkpoint`` (uuid), ``model`` (a model name; created, owned by the user, when
    no model has it), ``next`` (the page to return to; see ``dashboard.views._common.back``).
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
                target = svc.get_model(name)
            except svc.ModelNotFound:
                target = svc.model_create(owner=request.user, name=name)
            version = svc.version_register(model=target, user=request.user, checkpoint_uuid=uuid)
    except RegistryError as exc:
        messages.error(request, f"Checkpoint not registered: {_first_error(exc)}")
        return back(request, "dashboard:models")
    messages.success(request, f"Registered checkpoint {uuid} as {name} version {version.version}")
    return back(request, "dashboard:model", name)


def _first_error(exc: RegistryError) -> str:
    for messages_ in exc.errors.values():
        if messages_:
            return messages_[0]
    return exc.detail
