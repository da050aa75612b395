"""The compare page (``/compare/?trial=1&trial=7``): ticked trials of one or several experiments,
their metric charts overlaid and their hyperparameters diffed (``dashboard.compare_selectors``)."""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from dashboard import overview
from dashboard.compare_selectors import hparam_diff, parse_trial_ids
from registry.authz import scoped
from registry.models import Trial, blob_fields


@require_GET
@login_required
def trial_compare(request: HttpRequest) -> HttpResponse:
    """Charts of the ticked trials overlaid (one source per experiment) and their hparams diffed.

    Unknown ids are reported on the page (status 400 when nothing valid remains); a bounded number
    of queries whatever the number of trials.
    """
    ids, errors = parse_trial_ids(request.GET.getlist("trial"))
    found = {
        t.id: t
        for t in scoped(Trial.objects.filter(id__in=ids), request.user)
        .select_related("experiment")
        .defer(*blob_fields("experiment__"))
    }
    missing = [i for i in ids if i not in found]
    errors += [f"trial: no trial {i}." for i in missing]
    trials = [found[i] for i in ids if i in found]
    by_experiment: dict[int, list[int]] = defaultdict(list)
    for trial in trials:
        by_experiment[trial.experiment_id].append(trial.id)
    chart_options = {
        "sources": [
            {"url": reverse("registry-api:experiment-metrics", args=[exp_id]), "trialIds": tids}
            for exp_id, tids in by_experiment.items()
        ],
        "metrics": overview.metric_keys(Q(trial_id__in=[t.id for t in trials])) if trials else [],
        "trials": overview.trial_entries(trials, with_experiment=len(by_experiment) > 1),
        "bestTrialId": None,
    }
    context = {
        "trials": trials,
        "errors": errors,
        "diff": hparam_diff(trials),
        "chart_options": chart_options,
        "several_experiments": len(by_experiment) > 1,
    }
    status = 400 if errors and not trials else 200
    return render(request, "dashboard/compare.html", context, status=status)
