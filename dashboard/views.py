"""Dashboard pages: plain function views behind ``@login_required`` (STYLE.md §1, §9)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard import selectors
from dashboard.bulk import BULK_ACTIONS
from dashboard.filters import ExperimentFilter, sort_columns
from registry.models import Experiment, Trial
from registry.scheduling import host_list

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
    """One experiment: header, metrics chart, trials with their checkpoints."""
    exp = _get_experiment(experiment_id)
    trials = selectors.experiment_trials(exp)
    searcher = exp.config.get("searcher", {}) if isinstance(exp.config, dict) else {}
    context = {
        "experiment": exp,
        "trials": trials,
        "searcher": searcher,
        "max_length": selectors.format_length(searcher.get("max_length")),
        "figure": selectors.experiment_figure(exp, trials),
        "updated": selectors.update_token(exp, trials),
        "experiment_actions": selectors.experiment_actions(exp),
    }
    return render(request, "dashboard/experiment.html", context)


@never_cache
@require_GET
@login_required
def experiment_live(request: HttpRequest, experiment_id: int) -> JsonResponse:
    """Polled by ``static/js/experiment.js``: ``{"updated", "state", "progress", "figure", ...}``.

    ``?since=<token>`` is the token the page already shows; when nothing changed, ``figure``,
    ``trials_html`` and ``controls_html`` are null so an idle poll costs a few summary reads and
    no series reads. The two HTML parts carry the control forms legal in the new states.
    """
    exp = _get_experiment(experiment_id)
    trials = selectors.experiment_trials(exp)
    token = selectors.update_token(exp, trials)
    changed = request.GET.get("since") != token
    figure = selectors.experiment_figure(exp, trials) if changed else None
    trials_html = controls_html = None
    if changed:
        trials_html = render_to_string(
            "dashboard/_trials.html", {"experiment": exp, "trials": trials}, request=request
        )
        controls_html = render_to_string(
            "dashboard/_experiment_controls.html",
            {"experiment": exp, "experiment_actions": selectors.experiment_actions(exp)},
            request=request,
        )
    return JsonResponse(
        {
            "updated": token,
            "state": exp.state,
            "progress": exp.progress,
            "terminal": exp.is_terminal,
            "best_validation": exp.best_validation,
            "figure": figure,
            "trials_html": trials_html,
            "controls_html": controls_html,
        }
    )


@require_GET
@login_required
def trial_logs(request: HttpRequest, trial_id: int) -> HttpResponse:
    """The last lines a trial printed (all runs), oldest first."""
    trial = get_object_or_404(Trial.objects.select_related("experiment"), id=trial_id)
    lines = selectors.trial_log_tail(trial)
    context = {"trial": trial, "lines": lines, "limit": selectors.LOG_TAIL_LINES}
    return render(request, "dashboard/trial_logs.html", context)


@require_GET
@login_required
def workers(request: HttpRequest) -> HttpResponse:
    """Worker hosts: slots, devices, heartbeat, and the trial runs placed on each."""
    context = {"hosts": host_list(), "timeout": settings.HEADWAY_HOST_TIMEOUT_SECONDS}
    return render(request, "dashboard/workers.html", context)
