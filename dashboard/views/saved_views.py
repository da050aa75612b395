"""Saved views of the trials table and of the experiment list (``dashboard.saved_views``).

Saving posts the table's current ``filter``, ``sort`` and ``columns`` (hidden fields of the
form under the table) and a ``name``; the answer redirects to the table with the view applied.
A field that does not check answers 400 naming it, as the dashboard's other forms do for a
request no page builds. Applying a view is a plain link (its query string); there is no route.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from dashboard import saved_views
from dashboard.models import SavedView
from dashboard.views._common import bad_request
from registry.authz import scoped
from registry.errors import InvalidInput
from registry.models import Experiment


def _save(request: HttpRequest, experiment: Experiment | None) -> SavedView | HttpResponse:
    try:
        return saved_views.view_save(
            owner=request.user,
            experiment=experiment,
            name=request.POST.get("name", ""),
            filter_text=request.POST.get("filter", ""),
            sort=request.POST.get("sort", ""),
            columns=request.POST.get("columns", ""),
        )
    except InvalidInput as exc:
        field, problems = next(iter(exc.errors.items()))
        return bad_request(f"{field}: {' '.join(problems)}")


def _to(url: str, view: SavedView, anchor: str = "") -> HttpResponse:
    params = view.params
    return redirect(f"{url}?{params}{anchor}" if params else f"{url}{anchor}")


@require_POST
@login_required
def experiment_view_save(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """``POST /experiments/<id>/views/``: save the trials table's view (fields ``name``,
    ``filter``, ``sort``, ``columns``) and show the table with it. 404 for an experiment the
    user cannot read; 400 naming a field that does not check."""
    experiment = get_object_or_404(
        scoped(Experiment.objects.only("id", "project_id"), request.user), id=experiment_id
    )
    view = _save(request, experiment)
    if isinstance(view, HttpResponse):
        return view
    messages.success(request, f"View “{view.name}” saved.")
    return _to(reverse("dashboard:experiment", args=[experiment.id]), view, "#trials-heading")


@require_POST
@login_required
def list_view_save(request: HttpRequest) -> HttpResponse:
    """``POST /views/``: save the experiment list's view (``name``, ``filter``, ``sort``) and
    show the list with it; 400 naming a field that does not check."""
    view = _save(request, None)
    if isinstance(view, HttpResponse):
        return view
    messages.success(request, f"View “{view.name}” saved.")
    return _to(reverse("dashboard:experiments"), view)


@require_POST
@login_required
def view_delete(request: HttpRequest, view_id: int) -> HttpResponse:
    """``POST /views/<id>/delete``: delete a view (its owner or a site admin) and go back to
    its table. 404 for no such view or a view of an experiment the user cannot read; 403 for
    another user's view."""
    view = get_object_or_404(SavedView.objects.select_related("experiment"), id=view_id)
    if view.experiment_id is not None:
        get_object_or_404(
            scoped(Experiment.objects.only("id"), request.user), id=view.experiment_id
        )
    if not saved_views.can_delete(request.user, view):
        raise PermissionDenied("Only its owner or a site admin deletes a view.")
    view.delete()
    messages.success(request, f"View “{view.name}” deleted.")
    if view.experiment_id is None:
        return redirect("dashboard:experiments")
    url = reverse("dashboard:experiment", args=[view.experiment_id])
    return redirect(f"{url}#trials-heading")
