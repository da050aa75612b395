"""Dashboard pages: plain function views behind ``@login_required`` (STYLE.md §1, §9)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard import experiment_config, overview, selectors
from dashboard.bulk import BULK_ACTIONS
from dashboard.filters import ExperimentFilter, sort_columns
from registry.models import Experiment
from registry.pools import hosts_by_pool

EXPERIMENTS_PER_PAGE = 50


def _get_experiment(experiment_id: int) -> Experiment:
    # Every logged-in user may read every experiment, as in the REST API.
    return get_object_or_404(
        Experiment.objects.select_related("owner").defer("model_definition"), id=experiment_id
    )


@require_GET
@login_required
def experiments(request: HttpRequest) -> HttpResponse:
    """Experiment list: filtered and sorted by the query string, 50 a page, archived hidden.

    Filters and sort are ``dashboard.filters.ExperimentFilter`` over
    ``selectors.experiment_list()``; a bounded number of queries whatever the number of
    experiments or trials (one for the page's rows, one count, the owner select's users).
    The page links (sort headers, pager) keep every other query parameter.
    """
    filterset = ExperimentFilter(data=request.GET, queryset=selectors.experiment_list())
    page = Paginator(filterset.qs, EXPERIMENTS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filter": filterset,
        "columns": sort_columns(request.GET),
        "bulk_actions": BULK_ACTIONS,
        "query": request.GET.urlencode(),
        "filtered": any(k != "page" and v for k, v in request.GET.items()),
    }
    return render(request, "dashboard/experiments.html", context)


@require_GET
@login_required
def experiment(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """One experiment: header, controls, metric charts, hyperparameter views, trials, config.

    The charts are drawn by ``static/js/charts.js`` from the metrics endpoint; the page embeds
    only the options (``dashboard.overview``). A bounded number of queries whatever the number of
    trials or points.
    """
    exp = _get_experiment(experiment_id)
    trials = selectors.experiment_trials(exp, request.user)
    searcher = exp.config.get("searcher", {}) if isinstance(exp.config, dict) else {}
    chart_options = overview.experiment_chart_options(exp, trials)
    context = {
        "experiment": exp,
        "trials": trials,
        "hparam_columns": overview.hparam_columns(trials),
        "best_trial_id": chart_options["bestTrialId"],
        "searcher": searcher,
        "max_length": selectors.format_search_length(searcher),
        "chart_options": chart_options,
        "hparam_data": overview.hparam_data(exp, trials),
        "config": experiment_config.config_views(exp),
        "updated": selectors.update_token(exp, trials),
        "experiment_actions": selectors.experiment_actions(exp, request.user),
    }
    return render(request, "dashboard/experiment.html", context)


@never_cache
@require_GET
@login_required
def experiment_live(request: HttpRequest, experiment_id: int) -> JsonResponse:
    """Polled by ``static/js/experiment.js``: ``{"updated", "state", "progress", "metrics", ...}``.

    ``?since=<token>`` is the token the page already shows; when nothing changed, ``metrics``,
    ``trials_html`` and ``controls_html`` are null so an idle poll costs a few summary reads and
    no series reads. When something changed the page fetches the new points itself
    (``after_step``); ``metrics`` lists every charted ``(group, name)`` so new metrics get a chart.
    The two HTML parts carry the control forms legal in the new states.
    """
    exp = _get_experiment(experiment_id)
    trials = selectors.experiment_trials(exp, request.user)
    token = selectors.update_token(exp, trials)
    changed = request.GET.get("since") != token
    metric_list = trials_html = controls_html = None
    best = None
    if changed:
        metric_list = overview.metric_keys(Q(trial__experiment_id=exp.id))
        best = overview.best_trial_id(exp, trials)
        trials_html = render_to_string(
            "dashboard/_trials.html",
            {
                "experiment": exp,
                "trials": trials,
                "hparam_columns": overview.hparam_columns(trials),
                "best_trial_id": best,
            },
            request=request,
        )
        controls_html = render_to_string(
            "dashboard/_experiment_controls.html",
            {
                "experiment": exp,
                "experiment_actions": selectors.experiment_actions(exp, request.user),
            },
            request=request,
        )
    return JsonResponse(
        {
            "updated": token,
            "state": exp.state,
            "progress": exp.progress,
            "terminal": exp.is_terminal,
            "best_validation": exp.best_validation,
            "best_trial_id": best,
            "metrics": metric_list,
            "trials_html": trials_html,
            "controls_html": controls_html,
        }
    )


@require_GET
@login_required
def workers(request: HttpRequest) -> HttpResponse:
    """Worker hosts grouped by resource pool (each with a summary line: alive hosts, slots in
    use, queued runs): slots, devices, heartbeat, and the trial runs placed on each."""
    context = {"pools": hosts_by_pool(), "timeout": settings.HEADWAY_HOST_TIMEOUT_SECONDS}
    return render(request, "dashboard/workers.html", context)


@require_GET
@login_required
def experiment_files(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """The model definition's file list and, with ``?path=``, one file shown as text.

    Answers 400 for an unsafe ``path`` (absolute, ``..``) and 404 for one not in the archive.
    """
    exp = _get_experiment(experiment_id)
    files = experiment_config.model_files(exp.id)
    path = request.GET.get("path")
    view = None
    if path:
        try:
            view = experiment_config.model_file(exp.id, path)
        except ValueError as exc:
            return HttpResponseBadRequest(f"path: {exc}")
        if view is None:
            raise Http404(f"{path!r} is not a file of this model definition.")
    context = {"experiment": exp, "files": files, "view": view}
    return render(request, "dashboard/experiment_files.html", context)


LIVE_LIST_MAX_IDS = 100


@never_cache
@require_GET
@login_required
def experiments_live(request: HttpRequest) -> JsonResponse:
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
    rows = selectors.experiment_list().filter(id__in=ids).order_by("id")
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
