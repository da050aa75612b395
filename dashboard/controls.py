"""Control views: POST-only forms that pause, activate, cancel, kill, archive and continue.

Each view only validates the request and calls one ``registry.lifecycle`` function, the single
place that changes states (STYLE.md §3); the outcome is shown with a ``messages`` note on the
page it redirects to. An illegal transition (a stale page, a double click) becomes an error note,
never a 500. Only the owner or an admin may use a control (``registry.authz``, the rule the REST
API applies); anyone else gets 403 naming the owner rule (the pages do not show them the forms).

Every form carries a ``next`` field, the page it was posted from (trial page or experiment page);
the views go back there when it is a same-host path (Django's ``url_has_allowed_host_and_scheme``,
the check its login view uses) and to the experiment page otherwise, so an outside ``next`` can
never turn a control into an open redirect.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from dashboard.forms import ContinueTrialForm, stash_continue_form
from dashboard.views._common import back, control_service, ensure
from headway.expconf import merge_hparam_overrides
from registry import authz, lifecycle
from registry.errors import RegistryError
from registry.models import Experiment, Trial

EXPERIMENT_CONTROLS: dict[str, Callable[..., Experiment]] = {
    "pause": lifecycle.experiment_pause,
    "activate": lifecycle.experiment_activate,
    "cancel": lifecycle.experiment_cancel,
    "kill": lifecycle.experiment_kill,
    "archive": lifecycle.experiment_archive,
    "unarchive": lifecycle.experiment_unarchive,
}
TRIAL_CONTROLS: dict[str, Callable[..., Trial]] = {
    "pause": lifecycle.trial_pause,
    "activate": lifecycle.trial_activate,
    "cancel": lifecycle.trial_cancel,
    "kill": lifecycle.trial_kill,
}
# The bulk controls of the experiment list (a subset of EXPERIMENT_CONTROLS), action -> past
# participle for the notes; order is button order on the list page.
BULK_ACTIONS: dict[str, str] = {
    "pause": "paused",
    "activate": "activated",
    "cancel": "canceled",
    "archive": "archived",
}


@require_POST
@login_required
def trial_control(request: HttpRequest, trial_id: int, action: str) -> HttpResponse:
    """``POST /trials/<id>/control/<action>``: one of ``TRIAL_CONTROLS``.

    Redirects to ``next`` (the trial page or the experiment page it was posted from; default:
    the trial's experiment page) with ``Trial <id>: <STATE>`` or the refusal's reason. Raises
    ``Http404`` for an unknown action or trial.
    """
    service = control_service(TRIAL_CONTROLS, action)
    trial = get_object_or_404(Trial.objects.only("id", "experiment_id"), id=trial_id)
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
    (issue #9: "creates the warm-started trial and navigates to it"). On bad input or a refusal,
    goes back to ``next`` (default: the trial's experiment page) with the error note; for field
    errors the typed values and the errors are kept in the session so that page re-opens the
    form with them (``dashboard.forms.stash_continue_form``).
    """
    trial = get_object_or_404(Trial.objects.only("id", "experiment_id", "hparams"), id=trial_id)
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
