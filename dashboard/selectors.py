"""Reads for the dashboard pages (HackSoft "selectors"): querysets, chart series, live tokens.

Lists read only the summary fields the registry keeps on each row (``progress``,
``best_validation``, ``summary_metrics``); metric series come from ``registry.metrics``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db.models import (
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from headway.expconf import ConfigError, Length, flatten_hparams
from registry.authz import can_change
from registry.lifecycle import EXPERIMENT_CONTROLS, TRIAL_CONTROLS, legal_controls
from registry.models import (
    Checkpoint,
    CheckpointState,
    Experiment,
    State,
    Trial,
    TrialLog,
)

CHECKPOINT_DOWNLOAD_URL = "/api/v1/checkpoints/{uuid}/download"
LOG_TAIL_LINES = 2000
# Which buttons to show. This only hides controls that ``registry.lifecycle`` would refuse
# (docs/lifecycle.md); the lifecycle still decides, so a stale page gets its 409 message.


# Trials that still run or finish running: not PAUSED and not ended.
ACTIVE_TRIAL_STATES = (
    State.ACTIVE,
    State.STOPPING_COMPLETED,
    State.STOPPING_CANCELED,
    State.STOPPING_KILLED,
    State.STOPPING_ERROR,
)


def _trial_count(**filters: Any) -> Coalesce:
    # A correlated subquery rather than a JOIN + GROUP BY: the database counts trials only for
    # the page of rows it returns (unless the page is sorted by the count itself).
    counts = (
        Trial.objects.filter(experiment=OuterRef("pk"), **filters)
        .order_by()
        .values("experiment")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


def experiment_list(now: datetime | None = None) -> QuerySet[Experiment]:
    """Experiments newest first, annotated for the list page, in one query (no N+1).

    Each row has the owner joined and these annotations: ``num_trials`` (all trials),
    ``active_trials`` (trials in ``ACTIVE_TRIAL_STATES``), ``searcher_name`` and ``metric_name``
    (``config.searcher.name`` / ``.metric``, read by the database so the large ``config`` column
    is not loaded), ``first_label`` (``labels[0]``, the label sort key) and ``duration``
    (``ended_at`` or ``now`` minus ``created_at``, a ``timedelta``). ``config``,
    ``model_definition``, ``original_config`` and ``searcher_state`` are deferred: the list
    template must not read them (or ``searcher_metric``), or each row costs one more query.
    Archived experiments are included; ``dashboard.filters.ExperimentFilter`` hides them.
    Experiments being deleted (DELETING) are left out; DELETE_FAILED ones stay listed.

    Arguments:
        now: the end of still-running experiments' durations (default: ``timezone.now()``).
    """
    end = Coalesce(F("ended_at"), Value(now or timezone.now(), output_field=DateTimeField()))
    return (
        Experiment.objects.not_deleted()
        .select_related("owner", "project")
        .without_blobs()
        .defer("config")
        .annotate(
            num_trials=_trial_count(),
            active_trials=_trial_count(state__in=ACTIVE_TRIAL_STATES),
            searcher_name=KT("config__searcher__name"),
            metric_name=KT("config__searcher__metric"),
            first_label=KT("labels__0"),
            duration=ExpressionWrapper(end - F("created_at"), output_field=DurationField()),
        )
        .order_by("-id")
    )


def format_length(length: Any) -> str:
    """``{"batches": 100}`` -> ``"100 batches"`` (``Length``'s own text); empty for None."""
    if length is None:
        return ""
    try:
        return str(Length.parse(length))
    except ConfigError:
        return str(length)


def format_search_length(searcher: Any) -> str:
    """What the experiment page shows as its length: ``searcher.max_length`` (``"100
    batches"``), else an ASHA's ``max_time`` in its ``time_metric`` (Determined 0.38), else
    that the script decides (no ``max_length``)."""
    if not isinstance(searcher, dict):
        return ""
    if searcher.get("max_length") is not None:
        return format_length(searcher["max_length"])
    if searcher.get("max_time") is not None and searcher.get("time_metric"):
        return f"{searcher['max_time']} {searcher['time_metric']} (time_metric)"
    return "set by the script"


def experiment_actions(experiment: Experiment, user: Any = None) -> list[str]:
    """The experiment controls legal in its current state and permitted to ``user``, in button
    order.

    Read from ``registry.lifecycle``'s table; ``archive`` only while not archived, and
    ``unarchive`` when archived. None when ``user`` may not change the experiment
    (``registry.authz.can_change``: not its owner nor an admin); ``user=None`` skips that check.
    """
    if user is not None and not can_change(
        user, experiment.owner_id, experiment.project.workspace_id
    ):
        return []
    actions = legal_controls(EXPERIMENT_CONTROLS, experiment.state)
    if experiment.archived:
        return [a for a in actions if a != "archive"] + ["unarchive"]
    return actions


def trial_actions(
    trial: Trial, user: Any = None, *, owner_id: int | None = None, workspace_id: int | None = None
) -> list[str]:
    """The trial controls (pause, activate, cancel, kill) legal in its current state; none when
    ``user`` is given and may not change the trial (``owner_id``: its experiment's owner;
    ``workspace_id``: its experiment's workspace)."""
    if user is not None and not can_change(user, owner_id, workspace_id):
        return []
    return [a for a in legal_controls(TRIAL_CONTROLS, trial.state) if a != "continue"]


def trial_can_continue(
    trial: Trial,
    checkpoints: Sequence[Checkpoint],
    user: Any,
    owner_id: int,
    workspace_id: int | None = None,
) -> bool:
    """Whether to offer "Continue trial": PAUSED or ended, with a checkpoint, and ``user`` may
    change the trial (its owner or an admin)."""
    return (
        "continue" in legal_controls(TRIAL_CONTROLS, trial.state)
        and bool(checkpoints)
        and (user is None or can_change(user, owner_id, workspace_id))
    )


def experiment_trials(
    experiment: Experiment, user: Any = None, trials: Sequence[Trial] | None = None
) -> list[Trial]:
    """The experiment's trials (or only ``trials``, e.g. one page of the trials table) with
    display extras attached (controls permitted to ``user``).

    Each trial gets ``current_run`` (its latest ``TrialRun`` or None), ``hparams_flat``,
    ``checkpoint_list`` (completed checkpoints, newest step first, each with ``download_url``),
    ``actions`` (``trial_actions``) and ``can_continue`` (PAUSED or ended, with a checkpoint).
    """
    if trials is None:
        trials = list(experiment.trials.prefetch_related("runs").order_by("id"))
    else:
        trials = list(trials)
    checkpoints: dict[int, list[Checkpoint]] = {t.id: [] for t in trials}
    # The JSON columns are never shown here; decoding them was a third of this function's time
    # with 10 checkpoints per trial (bench/dashboard.py).
    rows = (
        Checkpoint.objects.filter(trial_id__in=list(checkpoints), state=CheckpointState.COMPLETED)
        .defer("resources", "metadata", "storage")
        .order_by("-steps_completed", "-created_at")
    )
    # The display extras are plain attributes set on model instances for the templates; mypy
    # knows only the models' fields, hence the attr-defined ignores below.
    for checkpoint in rows:
        checkpoint.download_url = CHECKPOINT_DOWNLOAD_URL.format(uuid=checkpoint.uuid)  # type: ignore[attr-defined]
        checkpoints.setdefault(checkpoint.trial_id, []).append(checkpoint)
    for trial in trials:
        runs = {run.run_id: run for run in trial.runs.all()}
        trial.current_run = runs.get(trial.run_id)  # type: ignore[attr-defined]
        trial.hparams_flat = flatten_hparams(trial.hparams)  # type: ignore[attr-defined]
        trial.checkpoint_list = checkpoints.get(trial.id, [])  # type: ignore[attr-defined]
        trial.actions = trial_actions(  # type: ignore[attr-defined]
            trial, user, owner_id=experiment.owner_id, workspace_id=experiment.project.workspace_id
        )
        trial.can_continue = trial_can_continue(  # type: ignore[attr-defined]
            trial,
            trial.checkpoint_list,  # type: ignore[attr-defined]
            user,
            experiment.owner_id,
            experiment.project.workspace_id,
        )
    return trials


def _report_count(summary_metrics: Any) -> int:
    if not isinstance(summary_metrics, dict):
        return 0
    return sum(
        entry.get("count", 0)
        for by_name in summary_metrics.values()
        if isinstance(by_name, dict)
        for entry in by_name.values()
        if isinstance(entry, dict)
    )


def update_token(experiment: Experiment, trials: Iterable[Trial]) -> str:
    """A short hash that changes whenever anything the experiment page shows changes.

    Built from summary fields only (states, progress, steps, per-metric report counts, latest
    checkpoint, restarts, scheduling messages), so the live endpoint can tell "nothing new" without reading series.
    """
    parts: list[Any] = [
        experiment.state,
        experiment.progress,
        experiment.best_validation,
    ]
    for trial in trials:
        parts.append(
            [
                trial.id,
                trial.state,
                trial.run_id,
                trial.restarts,
                trial.steps_completed,
                trial.best_validation,
                str(trial.latest_checkpoint),
                _report_count(trial.summary_metrics),
                trial.scheduling_message,
            ]
        )
    digest = hashlib.sha1(json.dumps(parts, default=str).encode(), usedforsecurity=False)
    return digest.hexdigest()[:16]


def trial_log_tail(trial: Trial, limit: int = LOG_TAIL_LINES, query: str = "") -> list[TrialLog]:
    """The last ``limit`` log lines of a trial (those containing ``query``, case-insensitive,
    when given), oldest first. One query."""
    rows = TrialLog.objects.filter(trial=trial)
    if query:
        rows = rows.filter(message__icontains=query)
    found = list(rows.order_by("-id")[:limit])
    found.reverse()
    return found
