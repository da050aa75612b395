"""The trial page (``/trials/<id>/``): header, error of a failed run, charts, checkpoints, runs;
the trials table's row menu, and the trial's controls, "Continue trial" and notes.

Server-rendered like the experiment page: the chart options are rendered as JSON
(``json_script``) and the vendored plotly.js draws them through ``static/js/board.js`` and
``static/js/charts.js`` (``system_board.js`` for the system metrics, ``lineage.js`` for a
continued trial's parent curves). A fixed number of SQL queries whatever the number
of checkpoints, runs or metric points (``dashboard.trial_selectors``). Controls call one
``registry.lifecycle`` function each and come back with a ``messages`` note (``_common.back``).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard import trial_selectors
from dashboard.controls import TRIAL_CONTROLS
from dashboard.edit_forms import NotesForm
from dashboard.forms import ContinueTrialForm, stash_continue_form
from dashboard.lineage import metric_board_options, system_board_options, trial_lineage
from dashboard.selectors import CHECKPOINT_DOWNLOAD_URL
from dashboard.views._common import back, control_service, edit_page, ensure
from headway.expconf import merge_hparam_overrides
from registry import authz, lifecycle
from registry.authz import scoped
from registry.errors import RegistryError
from registry.models import Checkpoint, CheckpointState, Trial, blob_fields


@require_GET
@login_required
def trial_detail(request: HttpRequest, trial_id: int) -> HttpResponse:
    """One trial: state, hparams, progress, one chart per metric, system metrics, checkpoints,
    runs, controls, and the trials it was continued from / into (``dashboard.lineage``).

    As in the REST API: 404 where the user has no role in the trial's workspace. Raises ``Http404`` for an
    unknown trial. For an ERROR trial the last run's exit code and log tail come first.
    """
    obj = get_object_or_404(
        scoped(
            Trial.objects.select_related("experiment").defer(*blob_fields("experiment__")),
            request.user,
        ),
        id=trial_id,
    )
    lineage = trial_lineage(obj, request.user)
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


@never_cache
@require_GET
@login_required
def trial_menu(request: HttpRequest, trial_id: int) -> HttpResponse:
    """An HTML fragment: the row menu of the experiment page's trials table, fetched when its
    "Actions" button is pressed (``static/js/trials_table.js``), so the page carries no per-trial
    forms (a 1,000-trial table would otherwise send 3,000 control forms nobody opens).

    It holds the trial's controls (only those legal in its state and permitted to the user: its
    experiment's owner or an admin; ``_trial_controls.html``, whose forms come back to the
    experiment page at the trial's row) and the checkpoint download command. Any logged-in user
    may read it, as the experiment page; 404 for an unknown trial. Queries: the trial with its
    experiment, its completed checkpoints.
    """
    trial = get_object_or_404(
        scoped(
            Trial.objects.select_related("experiment").defer(*blob_fields("experiment__")),
            request.user,
        ),
        id=trial_id,
    )
    checkpoints = list(
        Checkpoint.objects.filter(trial=trial, state=CheckpointState.COMPLETED)
        .defer("resources", "metadata", "storage")
        .order_by("-steps_completed", "-created_at")
    )
    for checkpoint in checkpoints:
        checkpoint.download_url = CHECKPOINT_DOWNLOAD_URL.format(uuid=checkpoint.uuid)  # type: ignore[attr-defined]
    trial_selectors.attach_controls(trial, checkpoints, request.user)
    context = {"experiment": trial.experiment, "trial": trial}
    return render(request, "dashboard/_trial_menu.html", context)


@require_POST
@login_required
def trial_control(request: HttpRequest, trial_id: int, action: str) -> HttpResponse:
    """``POST /trials/<id>/control/<action>``: one of ``TRIAL_CONTROLS``.

    Redirects to ``next`` (the trial page or the experiment page it was posted from; default:
    the trial's experiment page) with ``Trial <id>: <STATE>`` or the refusal's reason. Raises
    ``Http404`` for an unknown action or trial.
    """
    service = control_service(TRIAL_CONTROLS, action)
    trial = get_object_or_404(
        scoped(Trial.objects.only("id", "experiment_id"), request.user), id=trial_id
    )
    ensure(authz.ensure_can_change_trial, request, trial.id)
    try:
        trial = service(trial_id=trial.id)
    except RegistryError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Trial {trial.id}: {trial.state}")
    return back(request, "dashboard:experiment", trial.experiment_id)


@require_POST
@login_required
def trial_continue(request: HttpRequest, trial_id: int) -> HttpResponse:
    """``POST /trials/<id>/continue``: a new experiment warm-started from this trial.

    Form fields (``ContinueTrialForm``): ``checkpoint`` (uuid; empty = the trial's latest),
    ``max_length`` (batches; empty = unchanged), ``hparams`` (``NAME=VALUE`` lines), ``next``.
    On success, redirects to the new trial's page (``dashboard:trial``) with a success note
    (the warm-started trial is created and the user lands on it). On bad input or a refusal,
    goes back to ``next`` (default: the trial's experiment page) with the error note; for field
    errors the typed values and the errors are kept in the session so that page re-opens the
    form with them (``dashboard.forms.stash_continue_form``).
    """
    trial = get_object_or_404(
        scoped(Trial.objects.only("id", "experiment_id", "hparams"), request.user), id=trial_id
    )
    ensure(authz.ensure_can_change_trial, request, trial.id)
    form = ContinueTrialForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Trial {trial.id} not continued: {form.error_text()}")
        stash_continue_form(request, trial.id, form.errors)
        return back(request, "dashboard:experiment", trial.experiment_id)
    overrides = form.cleaned_data["hparams"]
    try:
        experiment = lifecycle.trial_continue(
            trial_id=trial.id,
            owner=request.user,
            checkpoint_uuid=form.cleaned_data["checkpoint"],
            max_length=form.cleaned_data["max_length"],
            hparams=merge_hparam_overrides(trial.hparams, overrides) if overrides else None,
        )
    except RegistryError as exc:
        messages.error(request, f"Trial {trial.id} not continued: {exc.detail}")
        if exc.errors:  # bad input (e.g. a checkpoint); a refused state needs only the note
            stash_continue_form(request, trial.id, exc.errors)
        return back(request, "dashboard:experiment", trial.experiment_id)
    # A "single" searcher: the new experiment's one trial exists once experiment_create returns.
    new_trial = experiment.trials.order_by("id").only("id").first()
    if new_trial is None:  # defensive: a searcher that creates trials later
        messages.success(
            request, f"Created experiment {experiment.id} (continues trial {trial.id})"
        )
        return redirect("dashboard:experiment", experiment.id)
    messages.success(
        request,
        f"Created trial {new_trial.id} in experiment {experiment.id} (continues trial {trial.id})",
    )
    return redirect("dashboard:trial", new_trial.id)


@require_http_methods(["GET", "POST"])
@login_required
def trial_notes(request: HttpRequest, trial_id: int) -> HttpResponse:
    """``/trials/<id>/notes``: the trial's Markdown notes (its experiment's owner or an admin),
    through ``registry.lifecycle.trial_patch``; see ``_common.edit_page``."""
    trial = get_object_or_404(
        scoped(
            Trial.objects.only("id", "notes", "experiment__owner_id").select_related("experiment"),
            request.user,
        ),
        id=trial_id,
    )
    ensure(authz.ensure_can_change_trial, request, trial.id)
    return edit_page(
        request,
        form_class=NotesForm,
        initial={"notes": trial.notes},
        save=lambda values: lifecycle.trial_patch(trial_id=trial.id, **values),
        title=f"Notes of trial {trial.id}",
        done=f"Notes of trial {trial.id} saved",
        back_to=resolve_url("dashboard:trial", trial.id) + "#notes",
    )
