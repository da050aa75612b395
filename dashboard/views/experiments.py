"""The experiment list (``/``): filtered, sorted and paged rows, their live columns polled by
``static/js/experiments.js``, and the bulk controls of the ticked rows.

Bulk pause / activate / cancel / archive is one POST form (CSRF-checked) naming an ``action`` and
the ticked ``experiment`` ids. Each experiment goes through the same ``registry.lifecycle``
function as its own button on the experiment page (``dashboard.controls.EXPERIMENT_CONTROLS``),
one transaction each, so a refusal for one experiment (an illegal state, or another user's
experiment: ``registry.authz``) changes nothing for it and does not stop the others. Kill (no
checkpoint) and unarchive stay per experiment, on its page, where the confirmation can name what
will be lost.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import (
    HttpRequest,
    HttpResponse,
    JsonResponse,
    QueryDict,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from dashboard import saved_views, selectors
from dashboard.controls import BULK_ACTIONS, EXPERIMENT_CONTROLS
from dashboard.filters import SORT_FIELDS, ExperimentFilter, sort_columns
from dashboard.views._common import bad_request
from registry import authz
from registry.authz import scoped
from registry.errors import RegistryError
from registry.models import Experiment, Project

EXPERIMENTS_PER_PAGE = 50
LIVE_LIST_MAX_IDS = 100
# More ids than a few pages' worth is not a click on the list page.
MAX_BULK_EXPERIMENTS = 500


@require_GET
@login_required
def experiment_list(request: HttpRequest, project_id: int | None = None) -> HttpResponse:
    """Experiment list: filtered and sorted by the query string, 50 a page, archived hidden.

    Filters (the filter box's language among them) and sort are
    ``dashboard.filters.ExperimentFilter`` over
    ``selectors.experiment_list()``; a bounded number of queries whatever the number of
    experiments or trials (one for the page's rows, one count, the owner select's users, the
    saved views).
    The page links (sort headers, pager) keep every other query parameter. With
    ``project_id`` (``/projects/{id}/``, a project's page) only that project's experiments.
    """
    data = request.GET.copy()
    if project_id is not None:
        get_object_or_404(scoped(Project.objects, request.user), id=project_id)
        data["project"] = str(project_id)
    filterset = ExperimentFilter(
        data=data,
        queryset=scoped(selectors.experiment_list(), request.user),
        request=request,
    )
    page = Paginator(filterset.qs, EXPERIMENTS_PER_PAGE).get_page(request.GET.get("page"))
    cleaned = getattr(filterset.form, "cleaned_data", {})
    project = cleaned.get("project")
    sort = request.GET.get("sort", "")
    context = {
        "page": page,
        "filter": filterset,
        # The breadcrumbs of a project's (or a workspace's) experiments.
        "project": project,
        "workspace": project.workspace if project else cleaned.get("workspace"),
        "columns": sort_columns(request.GET),
        "bulk_actions": BULK_ACTIONS,
        "query": data.urlencode(),
        "filtered": any(k != "page" and v for k, v in request.GET.items()),
        # Saved views of the list; the save form carries the applied filter (none when the
        # box's filter was ignored) and sort.
        "saved_views": saved_views.for_list(request.user),
        "view_filter": cleaned.get("filter") or "",
        "view_sort": sort if sort.removeprefix("-") in SORT_FIELDS else "",
    }
    return render(request, "dashboard/experiments.html", context)


@never_cache
@require_GET
@login_required
def experiment_list_live(request: HttpRequest) -> JsonResponse:
    """Polled by ``static/js/experiments.js``: the live columns of the listed experiments.

    ``?id=3&id=5`` (at most ``LIVE_LIST_MAX_IDS``) answers ``{"experiments": [{"id", "state",
    "terminal", "progress", "best_validation", "active_trials", "num_trials"}]}`` for those that
    exist, in one query. A non-integer id or too many ids answer 400 naming ``id``.
    """
    raw = request.GET.getlist("id")
    if len(raw) > LIVE_LIST_MAX_IDS:
        return JsonResponse({"id": [f"At most {LIVE_LIST_MAX_IDS} ids."]}, status=400)
    try:
        ids = [int(value) for value in raw]
    except ValueError:
        return JsonResponse({"id": ["Must be integers."]}, status=400)
    rows = scoped(selectors.experiment_list(), request.user).filter(id__in=ids).order_by("id")
    return JsonResponse(
        {
            "experiments": [
                {
                    "id": exp.id,
                    "state": exp.state,
                    "terminal": exp.is_terminal,
                    "progress": exp.progress,
                    "best_validation": exp.best_validation,
                    "active_trials": exp.active_trials,  # type: ignore[attr-defined]
                    "num_trials": exp.num_trials,  # type: ignore[attr-defined]
                }
                for exp in rows
            ]
        }
    )


def _back_to_list(query: str) -> HttpResponse:
    # Only a query string travels in the form, re-encoded here: the redirect always stays on
    # the list page (no open redirect), with its filters, sort and page.
    params = QueryDict(query).urlencode()
    url = reverse("dashboard:experiments")
    return redirect(f"{url}?{params}" if params else url)


@require_POST
@login_required
def experiment_bulk_control(request: HttpRequest) -> HttpResponse:
    """``POST /experiments/bulk``: apply one of ``BULK_ACTIONS`` to every ticked experiment.

    Form fields: ``action`` (a ``BULK_ACTIONS`` key), ``experiment`` (repeated ids), ``query``
    (the list page's query string, kept in the redirect). Leaves one success note listing the
    new states, and one error note per experiment that was not changed, with the lifecycle's
    reason (e.g. ``experiment 7 is COMPLETED; it can be paused only when ACTIVE``) or "not
    found". Answers 400 for an unknown action, a non-integer id or more than
    ``MAX_BULK_EXPERIMENTS`` ids; otherwise redirects to the list.
    """
    action = request.POST.get("action", "")
    if action not in BULK_ACTIONS:
        return bad_request(f"Unknown bulk action {action!r}.")
    try:
        ids = sorted({int(value) for value in request.POST.getlist("experiment")})
    except ValueError:
        return bad_request("Experiment ids must be integers.")
    if len(ids) > MAX_BULK_EXPERIMENTS:
        return bad_request(f"At most {MAX_BULK_EXPERIMENTS} experiments at once.")
    response = _back_to_list(request.POST.get("query", ""))
    if not ids:
        messages.warning(request, f"Tick at least one experiment to {action}.")
        return response
    existing = set(
        scoped(Experiment.objects.filter(id__in=ids), request.user).values_list("id", flat=True)
    )
    service = EXPERIMENT_CONTROLS[action]
    changed: list[str] = []
    for experiment_id in ids:
        if experiment_id not in existing:
            messages.error(request, f"Experiment {experiment_id} not found.")
            continue
        try:
            authz.ensure_can_change_experiment(request.user, experiment_id)
            experiment = service(experiment_id=experiment_id)
        except RegistryError as exc:
            messages.error(
                request, f"Experiment {experiment_id} not {BULK_ACTIONS[action]}: {exc.detail}"
            )
        else:
            archived = " (archived)" if experiment.archived else ""
            changed.append(f"experiment {experiment.id}: {experiment.state}{archived}")
    if changed:
        messages.success(request, f"{action.capitalize()}: " + ", ".join(changed))
    return response
