"""Bulk controls of the experiment list: pause, activate, cancel or archive the ticked rows.

One POST form (CSRF-checked) names an ``action`` and the ticked ``experiment`` ids. Each
experiment goes through the same ``registry.lifecycle`` function as its own button on the
experiment page (``dashboard.controls.EXPERIMENT_CONTROLS``), one transaction each, so a refusal
for one experiment (an illegal state, or another user's experiment: ``registry.authz``) changes
nothing for it and does not stop the others. Kill
(no checkpoint) and unarchive stay per experiment, on its page, where the confirmation can name
what will be lost.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from dashboard.controls import EXPERIMENT_CONTROLS
from registry import authz
from registry.errors import RegistryError
from registry.models import Experiment

# Action -> past participle for the notes; order is button order on the list page.
BULK_ACTIONS: dict[str, str] = {
    "pause": "paused",
    "activate": "activated",
    "cancel": "canceled",
    "archive": "archived",
}
# More ids than a few pages' worth is not a click on the list page.
MAX_BULK_EXPERIMENTS = 500


def _back_to_list(query: str) -> HttpResponse:
    # Only a query string travels in the form, re-encoded here: the redirect always stays on
    # the list page (no open redirect), with its filters, sort and page.
    params = QueryDict(query).urlencode()
    url = reverse("dashboard:experiments")
    return redirect(f"{url}?{params}" if params else url)


@require_POST
@login_required
def experiments_bulk(request: HttpRequest) -> HttpResponse:
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
        return HttpResponseBadRequest(f"Unknown bulk action {action!r}.")
    try:
        ids = sorted({int(value) for value in request.POST.getlist("experiment")})
    except ValueError:
        return HttpResponseBadRequest("Experiment ids must be integers.")
    if len(ids) > MAX_BULK_EXPERIMENTS:
        return HttpResponseBadRequest(f"At most {MAX_BULK_EXPERIMENTS} experiments at once.")
    response = _back_to_list(request.POST.get("query", ""))
    if not ids:
        messages.warning(request, f"Tick at least one experiment to {action}.")
        return response
    existing = set(Experiment.objects.filter(id__in=ids).values_list("id", flat=True))
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
