"""The experiment page's trials table as its own routes (``dashboard.trials_table``): one page of
rows as an HTML fragment (the page swaps it in when paging or sorting, so the legend's state and
the ticks survive), every trial as JSON for the page's scripts, and the table as CSV.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard import overview, trials_table
from registry.authz import scoped
from registry.models import Experiment, Trial


def _experiment(user: Any, experiment_id: int) -> Experiment:
    # As the experiment page: 404 where the user has no role in its workspace.
    return get_object_or_404(scoped(Experiment.objects.without_blobs(), user), id=experiment_id)


def table_html(
    request: HttpRequest, experiment: Experiment, trials: Sequence[Trial], best: int | None
) -> str:
    """``_trials.html`` for the page and sort of ``request.GET`` (``?page=``, ``?sort=``);
    ``trials`` is every trial (light), for the colour-by choices and the count."""
    table = trials_table.trial_page(
        experiment, request.user, page=request.GET.get("page"), sort=request.GET.get("sort")
    )
    return render_to_string(
        "dashboard/_trials.html",
        {
            "experiment": experiment,
            "table": table,
            "trials": table.rows,
            "hparam_columns": overview.hparam_columns(trials),
            "best_trial_id": best,
        },
        request=request,
    )


@never_cache
@require_GET
@login_required
def experiment_trials_table(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """``GET /experiments/<id>/trials/?page=N&sort=KEY``: one page of the trials table (HTML
    fragment, ``dashboard/_trials.html``). Unknown sort keys fall back to the default; a page
    past the end shows the last."""
    experiment = _experiment(request.user, experiment_id)
    trials = trials_table.all_trials_light(experiment)
    best = overview.best_trial_id(experiment, trials)
    return HttpResponse(table_html(request, experiment, trials, best))


@never_cache
@require_GET
@login_required
def experiment_trials_data(request: HttpRequest, experiment_id: int) -> JsonResponse:
    """``GET /experiments/<id>/trials/data``: ``dashboard.overview.trials_data`` of every trial
    (2 queries)."""
    experiment = _experiment(request.user, experiment_id)
    trials = trials_table.all_trials_light(experiment)
    return JsonResponse(overview.trials_data(experiment, trials))


@require_GET
@login_required
def experiment_trials_csv(request: HttpRequest, experiment_id: int) -> StreamingHttpResponse:
    """``GET /experiments/<id>/trials.csv?sort=KEY``: every trial of the experiment as CSV
    (``trials_table.csv_rows``), streamed, as an attachment ``experiment-<id>-trials.csv``."""
    experiment = _experiment(request.user, experiment_id)
    columns = overview.hparam_columns(trials_table.all_trials_light(experiment))
    response = StreamingHttpResponse(
        trials_table.csv_rows(experiment, request.GET.get("sort"), columns),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = (
        f'attachment; filename="experiment-{experiment.id}-trials.csv"'
    )
    return response
