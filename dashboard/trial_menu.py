"""The row menu of the experiment page's trials table, fetched when its "Actions" button is
pressed (``static/js/trials_table.js``), so the page carries no per-trial forms: a 1,000-trial
table would otherwise send 3,000 control forms nobody opens."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard.selectors import CHECKPOINT_DOWNLOAD_URL
from dashboard.trial_selectors import attach_controls
from registry.models import Checkpoint, CheckpointState, Trial


@never_cache
@require_GET
@login_required
def trial_menu(request: HttpRequest, trial_id: int) -> HttpResponse:
    """An HTML fragment: the trial's controls (only those legal in its state and permitted to
    the user: its experiment's owner or an admin; ``_trial_controls.html``, whose forms come
    back to the experiment page at the trial's row) and the checkpoint download command.

    Any logged-in user may read it, as the experiment page; 404 for an unknown trial. Queries:
    the trial with its experiment, its completed checkpoints.
    """
    trial = get_object_or_404(
        Trial.objects.select_related("experiment").defer("experiment__model_definition"),
        id=trial_id,
    )
    checkpoints = list(
        Checkpoint.objects.filter(trial=trial, state=CheckpointState.COMPLETED)
        .defer("resources", "metadata", "storage")
        .order_by("-steps_completed", "-created_at")
    )
    for checkpoint in checkpoints:
        checkpoint.download_url = CHECKPOINT_DOWNLOAD_URL.format(uuid=checkpoint.uuid)  # type: ignore[attr-defined]
    attach_controls(trial, checkpoints, request.user)
    context = {"experiment": trial.experiment, "trial": trial}
    return render(request, "dashboard/_trial_menu.html", context)
