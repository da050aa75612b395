"""The experiment page (``/experiments/<id>/``): header, controls, metric charts, hyperparameter
views, trials, config; its live poll, the model definition's files, and its owner's controls and
edit forms (name / description / labels, notes).

A control or edit only validates the request and calls one ``registry.lifecycle`` function, the
single place that changes states; the outcome is shown with a ``messages`` note on
the page it redirects to (``_common.back``). An illegal transition (a stale page, a double
click) becomes an error note, never a 500.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render, resolve_url
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard import experiment_config, overview, selectors, trials_table
from dashboard.controls import EXPERIMENT_CONTROLS
from dashboard.edit_forms import ExperimentEditForm, NotesForm
from dashboard.templatetags.edit_tags import label_line
from dashboard.views._common import (
    back,
    bad_request,
    control_service,
    edit_page,
    ensure,
)
from dashboard.views.experiment_trials import table_context, table_html
from registry import authz, lifecycle
from registry.authz import scoped
from registry.errors import RegistryError, StoredConfigInvalid
from registry.models import Experiment


def _get_experiment(user: Any, experiment_id: int) -> Experiment:
    # As in the REST API: 404 where the user has no role in the experiment's workspace.
    return get_object_or_404(
        # The page shows the submitted YAML (original_config): only the others are deferred.
        scoped(
            Experiment.objects.select_related("owner", "project__workspace").without_blobs(
                keep=["original_config"]
            ),
            user,
        ),
        id=experiment_id,
    )


@require_GET
@login_required
def experiment_detail(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """One experiment: header, controls, metric charts, hyperparameter views, trials, config.

    The charts are drawn by ``static/js/charts.js`` from the metrics endpoint; the page embeds
    only the options (``dashboard.overview``). A bounded number of queries whatever the number of
    trials or points.
    """
    exp = _get_experiment(request.user, experiment_id)
    try:
        searcher = exp.conf.searcher.model_dump(mode="json")
    except StoredConfigInvalid as exc:  # reported as the REST API does (409), not defaulted
        return HttpResponse(exc.detail, status=409, content_type="text/plain; charset=utf-8")
    trials = trials_table.all_trials_light(exp)
    chart_options = overview.experiment_chart_options(exp, trials)
    context = {
        **table_context(request, exp, trials, chart_options["bestTrialId"]),
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

    ``?since=<token>`` is the token the page already shows; ``?page=``, ``?sort=``,
    ``?filter=`` and ``?columns=`` the trials table's page, sort, filter and columns (its re-rendered HTML is that page); when nothing changed, ``metrics``,
    ``trials_html`` and ``controls_html`` are null so an idle poll costs a few summary reads and
    no series reads. When something changed the page fetches the new points itself
    (``after_step``); ``metrics`` lists every charted ``(group, name)`` so new metrics get a chart.
    The two HTML parts carry the control forms legal in the new states.
    """
    exp = _get_experiment(request.user, experiment_id)
    trials = trials_table.all_trials_light(exp)
    token = selectors.update_token(exp, trials)
    changed = request.GET.get("since") != token
    metric_list = trials_html = controls_html = None
    best = None
    if changed:
        metric_list = overview.metric_keys(Q(trial__experiment_id=exp.id))
        best = overview.best_trial_id(exp, trials)
        trials_html = table_html(request, exp, trials, best, metric_list)
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
            "trial_count": len(trials),
            "metrics": metric_list,
            "trials_html": trials_html,
            "controls_html": controls_html,
        }
    )


@require_GET
@login_required
def experiment_files(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """The model definition's file list and, with ``?path=``, one file shown as text.

    Answers 400 for an unsafe ``path`` (absolute, ``..``) and 404 for one not in the archive.
    """
    exp = _get_experiment(request.user, experiment_id)
    files = experiment_config.model_files(exp.id)
    path = request.GET.get("path")
    view = None
    if path:
        try:
            view = experiment_config.model_file(exp.id, path)
        except ValueError as exc:
            return bad_request(f"path: {exc}")
        if view is None:
            raise Http404(f"{path!r} is not a file of this model definition.")
    context = {"experiment": exp, "files": files, "view": view}
    return render(request, "dashboard/experiment_files.html", context)


@require_POST
@login_required
def experiment_control(request: HttpRequest, experiment_id: int, action: str) -> HttpResponse:
    """``POST /experiments/<id>/control/<action>``: one of ``EXPERIMENT_CONTROLS``.

    Redirects to ``next`` (see ``_common.back``; default: the experiment page) with
    ``Experiment <id>: <STATE>`` or the refusal's reason. Raises ``Http404`` for an unknown
    action or experiment.
    """
    service = control_service(EXPERIMENT_CONTROLS, action)
    get_object_or_404(scoped(Experiment.objects.only("id"), request.user), id=experiment_id)
    ensure(authz.ensure_can_change_experiment, request, experiment_id)
    try:
        experiment = service(experiment_id=experiment_id)
    except RegistryError as exc:
        messages.error(request, exc.detail)
    else:
        archived = " (archived)" if experiment.archived else ""
        messages.success(request, f"Experiment {experiment.id}: {experiment.state}{archived}")
    return back(request, "dashboard:experiment", experiment_id)


def _owned_experiment(request: HttpRequest, experiment_id: int) -> Experiment:
    experiment = get_object_or_404(
        scoped(
            Experiment.objects.without_blobs(keep=["original_config"]).defer("config"),
            request.user,
        ),
        id=experiment_id,
    )
    ensure(authz.ensure_can_change_experiment, request, experiment.id)
    return experiment


@require_http_methods(["GET", "POST"])
@login_required
def experiment_edit(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """``/experiments/<id>/edit``: name, description, labels (comma-separated), through
    ``registry.lifecycle.experiment_patch`` (the REST API's PATCH); see ``_common.edit_page``."""
    experiment = _owned_experiment(request, experiment_id)
    return edit_page(
        request,
        form_class=ExperimentEditForm,
        initial={
            "name": experiment.name,
            "description": experiment.description,
            "labels": label_line(experiment.labels),
        },
        save=lambda values: lifecycle.experiment_patch(experiment_id=experiment.id, **values),
        title=f"Edit experiment {experiment.id}",
        done=f"Experiment {experiment.id} saved",
        back_to=resolve_url("dashboard:experiment", experiment.id),
    )


@require_http_methods(["GET", "POST"])
@login_required
def experiment_notes(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """``/experiments/<id>/notes``: the experiment's Markdown notes (``_common.edit_page``)."""
    experiment = _owned_experiment(request, experiment_id)
    return edit_page(
        request,
        form_class=NotesForm,
        initial={"notes": experiment.notes},
        save=lambda values: lifecycle.experiment_patch(experiment_id=experiment.id, **values),
        title=f"Notes of experiment {experiment.id}",
        done=f"Notes of experiment {experiment.id} saved",
        back_to=resolve_url("dashboard:experiment", experiment.id) + "#notes",
    )
