"""The trial page (``/trials/<id>/``): header, error of a failed run, charts, checkpoints, runs.

Server-rendered like the experiment page (STYLE.md §9): the chart options are rendered as JSON
(``json_script``) and the vendored plotly.js draws them through ``static/js/board.js`` and
``static/js/charts.js`` (``system_board.js`` for the system metrics, ``lineage.js`` for a
continued trial's parent curves). A fixed number of SQL queries whatever the number
of checkpoints, runs or metric points (``dashboard.trial_selectors``).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from dashboard import trial_selectors
from dashboard.lineage import metric_board_options, system_board_options, trial_lineage
from registry.models import Trial


@require_GET
@login_required
def trial(request: HttpRequest, trial_id: int) -> HttpResponse:
    """One trial: state, hparams, progress, one chart per metric, system metrics, checkpoints,
    runs, controls, and the trials it was continued from / into (``dashboard.lineage``).

    Every logged-in user may read every trial, as in the REST API. Raises ``Http404`` for an
    unknown trial. For an ERROR trial the last run's exit code and log tail come first.
    """
    obj = get_object_or_404(
        Trial.objects.select_related("experiment").defer(
            "experiment__model_definition",
            "experiment__original_config",
            "experiment__searcher_state",
        ),
        id=trial_id,
    )
    lineage = trial_lineage(obj)
    checkpoints = trial_selectors.trial_checkpoints(obj)
    runs = trial_selectors.trial_runs(obj)
    trial_selectors.attach_controls(obj, checkpoints.rows, request.user)
    context = {
        "trial": obj,
        "experiment": obj.experiment,
        "checkpoints": checkpoints,
        "runs": runs,
        "error": trial_selectors.trial_error(obj, runs),
        "chart_options": metric_board_options(obj, lineage.parent),
        "system_options": system_board_options(obj),
        "lineage": lineage,
    }
    return render(request, "dashboard/trial.html", context)
