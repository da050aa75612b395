"""The experiment page's trials table as its own routes (``dashboard.trials_table``): one page of
rows as an HTML fragment (the page swaps it in when paging or sorting, so the legend's state and
the ticks survive), every trial as JSON for the page's scripts, the ids matching the filter box
(for "Select all matching"), and the table as CSV.

Every route takes the table's ``?filter=``, ``?columns=`` and ``?sort=``
(``dashboard.table_query``). The HTML shows a malformed filter's message and ignores it (as the
experiment list does); the JSON and CSV routes, which have nowhere to show it, answer 400 naming
``filter``.
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

from dashboard import overview, saved_views, trials_table
from dashboard.table_query import TableQuery, column_choices
from registry.authz import scoped
from registry.models import Experiment, Trial


def _experiment(user: Any, experiment_id: int) -> Experiment:
    # As the experiment page: 404 where the user has no role in its workspace.
    return get_object_or_404(scoped(Experiment.objects.without_blobs(), user), id=experiment_id)


def table_context(
    request: HttpRequest,
    experiment: Experiment,
    trials: Sequence[Trial],
    best: int | None,
    metrics: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """What ``_trials.html`` needs for ``request.GET`` (``?page=``, ``?sort=``, ``?filter=``,
    ``?columns=``); ``trials`` is every trial (light), for the colour-by and column choices;
    ``metrics`` the experiment's ``overview.metric_keys`` when the caller has them.
    Queries: those of ``trial_page``, the metric names (unless given), the saved views."""
    table = trials_table.trial_page(
        experiment,
        request.user,
        page=request.GET.get("page"),
        query=trials_table.read_query(request.GET),
    )
    hparams = overview.hparam_columns(trials)
    return {
        "experiment": experiment,
        "table": table,
        "trials": table.rows,
        "has_trials": bool(trials),
        "hparam_columns": hparams,
        "column_choices": column_choices(experiment, hparams, metrics) if trials else [],
        "best_trial_id": best,
        "saved_views": saved_views.for_experiment(experiment, request.user),
    }


def table_html(
    request: HttpRequest,
    experiment: Experiment,
    trials: Sequence[Trial],
    best: int | None,
    metrics: list[dict[str, str]] | None = None,
) -> str:
    """``_trials.html`` rendered with ``table_context``."""
    return render_to_string(
        "dashboard/_trials.html",
        table_context(request, experiment, trials, best, metrics),
        request=request,
    )


def _checked_query(request: HttpRequest) -> TableQuery | JsonResponse:
    query = trials_table.read_query(request.GET)
    if query.column_errors:
        return JsonResponse({"columns": query.column_errors}, status=400)
    return query


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


@never_cache
@require_GET
@login_required
def experiment_trials_ids(request: HttpRequest, experiment_id: int) -> JsonResponse:
    """``GET /experiments/<id>/trials/ids?filter=TEXT``: ``{"ids": [...]}``, every trial of the
    experiment matching the filter, in id order (1 query): what "Select all matching" ticks.
    A malformed filter or column answers 400 naming ``filter`` (``columns``)."""
    experiment = _experiment(request.user, experiment_id)
    query = _checked_query(request)
    if isinstance(query, JsonResponse):
        return query
    matching = trials_table.matching_trials(experiment, query)
    if query.filter_error:
        return JsonResponse({"filter": [query.filter_error]}, status=400)
    return JsonResponse({"ids": list(matching.order_by("id").values_list("id", flat=True))})


@require_GET
@login_required
def experiment_trials_csv(
    request: HttpRequest, experiment_id: int
) -> StreamingHttpResponse | JsonResponse:
    """``GET /experiments/<id>/trials.csv?sort=KEY&filter=TEXT&columns=NAMES``: the trials
    matching the filter as CSV (``trials_table.csv_rows``), streamed, as an attachment
    ``experiment-<id>-trials.csv``. A malformed filter or column answers 400 naming it."""
    experiment = _experiment(request.user, experiment_id)
    query = _checked_query(request)
    if isinstance(query, JsonResponse):
        return query
    trials_table.matching_trials(experiment, query)  # checks the filter
    if query.filter_error:
        return JsonResponse({"filter": [query.filter_error]}, status=400)
    columns = overview.hparam_columns(trials_table.all_trials_light(experiment))
    response = StreamingHttpResponse(
        trials_table.csv_rows(experiment, query, columns),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = (
        f'attachment; filename="experiment-{experiment.id}-trials.csv"'
    )
    return response
