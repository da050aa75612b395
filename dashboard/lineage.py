"""What the trial page adds to its charts: the warm-start lineage and the system-metrics board.

Lineage follows Determined's "continue trial" (``registry.lifecycle._continue``) and
``searcher.source_trial_id`` / ``source_checkpoint_uuid``: a trial whose first run warm-starts
from a checkpoint (``Trial.warm_start_checkpoint``) is a child of the checkpoint's trial. The
page links both ways, and the child's metric charts also draw the parent's series, dashed
(``static/js/lineage.js``).

System metrics (metric group ``system``, reported by ``headway.core._system_metrics``) get a
chart board of their own, drawn against wall time, and stay out of the training charts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db.models import Q
from django.urls import reverse

from dashboard import overview
from registry.authz import scoped
from registry.models import Checkpoint, Trial

SYSTEM_GROUP = "system"  # the SDK's group name (headway.core._system_metrics.SYSTEM_GROUP)


@dataclasses.dataclass(frozen=True)
class Lineage:
    """A trial's warm-start parent (with the checkpoint it started from) and its children."""

    parent: Trial | None
    parent_checkpoint: str | None
    children: list[Trial]


def trial_lineage(trial: Trial, user: Any) -> Lineage:
    """The trial this one was continued from, and the trials continued from this one (2 queries),
    among those ``user`` may read (``registry.authz.scoped``).

    A parent whose checkpoint row is gone (never registered) or that the user may not read is
    None; children are in id order.
    """
    parent = None
    source = trial.warm_start_checkpoint
    if source is not None:
        parent = (
            scoped(Trial.objects, user)
            .filter(id__in=Checkpoint.objects.filter(uuid=source).values("trial_id"))
            .only("id", "experiment_id", "hparams", "state")
            .first()
        )
    children = list(
        scoped(Trial.objects, user)
        .filter(
            warm_start_checkpoint__in=Checkpoint.objects.filter(trial_id=trial.id).values("uuid")
        )
        .only("id", "experiment_id", "state", "warm_start_checkpoint")
        .order_by("id")
    )
    return Lineage(parent, str(source) if parent is not None else None, children)


def metric_board_options(trial: Trial, parent: Trial | None) -> dict[str, Any]:
    """Options of the trial's metric board: its own series without the ``system`` group, and
    the parent's series of the same metrics as a second source (``lineage.js`` dashes them)."""
    options = overview.trial_chart_options(trial)
    options["metrics"] = [m for m in options["metrics"] if m["group"] != SYSTEM_GROUP]
    if parent is not None:
        url = reverse("registry-api:trial-metrics", args=[parent.id])
        options["sources"].append({"url": url, "trialId": parent.id})
        (entry,) = overview.trial_entries([parent])
        entry["label"] = f"Trial {parent.id} (parent)"
        options["trials"].append(entry)
        options["parentTrialId"] = parent.id
    return options


def system_board_options(trial: Trial) -> dict[str, Any]:
    """Options of the trial's ``system`` board (1 query); its metrics list is empty when the
    trial reported none (the template then shows a hint instead of the board)."""
    url = reverse("registry-api:trial-metrics", args=[trial.id])
    return {
        "sources": [{"url": url, "trialId": trial.id}],
        "metrics": overview.metric_keys(Q(trial_id=trial.id, group=SYSTEM_GROUP)),
        "trials": overview.trial_entries([trial]),
        "bestTrialId": None,
        "xAxis": "time",
    }
