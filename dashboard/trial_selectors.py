"""Reads for the trial page (``dashboard.views.trial``): checkpoints, runs, the error of a failed run.

Every function here runs a fixed number of SQL queries whatever the number of checkpoints, runs
or metric points (the page is tested with ``django_assert_max_num_queries``): series come
downsampled from ``registry.metrics.read_series``, the validation values shown next to the
checkpoints come from one query over the reports at the checkpoints' steps, and tables are capped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import Subquery

from dashboard.selectors import (
    CHECKPOINT_DOWNLOAD_URL,
    flatten_hparams,
    trial_actions,
    trial_can_continue,
)
from headway.metric_values import chartable
from registry.models import (
    Checkpoint,
    CheckpointState,
    MetricReport,
    State,
    Trial,
    TrialLog,
    TrialRun,
)

CHECKPOINT_ROWS = 100  # newest first; the best checkpoint is always added when older
ERROR_LOG_LINES = 50  # of the failed run, shown at the top of an ERROR trial's page
VALIDATION = "validation"


def _validation_by_step(trial: Trial) -> dict[int, dict[str, Any]]:
    """Validation metrics reported at the steps of the trial's completed checkpoints (1 query)."""
    steps = Checkpoint.objects.filter(trial=trial, state=CheckpointState.COMPLETED).values(
        "steps_completed"
    )
    rows = MetricReport.objects.filter(
        trial=trial, group=VALIDATION, steps_completed__in=Subquery(steps)
    ).values_list("steps_completed", "metrics")
    return {step: metrics for step, metrics in rows if isinstance(metrics, dict)}


def _best_step(
    validation: Mapping[int, Mapping[str, Any]], metric: str, smaller_is_better: bool
) -> int | None:
    """The step whose ``metric`` is best (ties: the earlier step); None without a value."""
    best: tuple[float, int] | None = None
    for step in sorted(validation):
        value = chartable(validation[step].get(metric))
        if value is None:
            continue
        key = value if smaller_is_better else -value
        if best is None or key < best[0]:
            best = (key, step)
    return best[1] if best else None


def _best_checkpoint(rows: Sequence[Checkpoint], step: int | None) -> Checkpoint | None:
    """The newest completed checkpoint among ``rows`` at ``step`` (None: none there)."""
    for ckpt in rows:  # newest first
        if ckpt.state == CheckpointState.COMPLETED and ckpt.steps_completed == step:
            return ckpt
    return None


@dataclasses.dataclass
class CheckpointTable:
    """The checkpoints table: rows (``Checkpoint`` with display extras) and how many exist."""

    rows: list[Checkpoint]
    total: int
    best: Checkpoint | None


def trial_checkpoints(trial: Trial) -> CheckpointTable:
    """The trial's checkpoints (every state), newest step first, at most ``CHECKPOINT_ROWS``.

    Each row gets ``download_url``, ``cli`` (``headway checkpoint download UUID``),
    ``validation`` (sorted ``(name, value)`` pairs reported at its step, or empty), ``is_best``
    and ``is_latest``. The best is the completed checkpoint whose step has the best value of the
    experiment's searcher metric (as Determined's "best checkpoint"); it is appended when older
    than the rows shown. Queries: 2 to 4.
    """
    experiment = trial.experiment
    validation = _validation_by_step(trial)
    best_step = _best_step(validation, experiment.searcher_metric, experiment.smaller_is_better)
    query = Checkpoint.objects.filter(trial=trial).defer("resources", "storage")
    rows = list(query.order_by("-steps_completed", "-created_at")[: CHECKPOINT_ROWS + 1])
    total = len(rows)
    if total > CHECKPOINT_ROWS:
        rows = rows[:CHECKPOINT_ROWS]
        total = query.count()
    best = _best_checkpoint(rows, best_step)
    if best is None and best_step is not None:
        # Older than the rows shown: one more query.
        best = (
            query.filter(state=CheckpointState.COMPLETED, steps_completed=best_step)
            .order_by("-created_at")
            .first()
        )
        if best is not None:
            rows.append(best)
    # Display extras are plain attributes on the instances (as dashboard.selectors does).
    for ckpt in rows:
        ckpt.download_url = CHECKPOINT_DOWNLOAD_URL.format(uuid=ckpt.uuid)  # type: ignore[attr-defined]
        ckpt.cli = f"headway checkpoint download {ckpt.uuid}"  # type: ignore[attr-defined]
        metrics = validation.get(ckpt.steps_completed, {})
        ckpt.validation = [(k, metrics[k]) for k in sorted(metrics)]  # type: ignore[attr-defined]
        ckpt.is_best = best is not None and ckpt.uuid == best.uuid  # type: ignore[attr-defined]
        ckpt.is_latest = ckpt.uuid == trial.latest_checkpoint  # type: ignore[attr-defined]
    return CheckpointTable(rows=rows, total=total, best=best)


def trial_runs(trial: Trial) -> list[TrialRun]:
    """The trial's runs, oldest first, with their worker host joined (1 query)."""
    return list(
        TrialRun.objects.filter(trial=trial)
        .select_related("host")
        .defer("token", "host__devices")
        .order_by("run_id")
    )


@dataclasses.dataclass
class RunError:
    """What the top of an ERROR trial's page shows: the failed run and its last log lines."""

    run: TrialRun | None
    lines: list[TrialLog]


def trial_error(trial: Trial, runs: Sequence[TrialRun]) -> RunError | None:
    """For an ERROR trial: its last run (exit code) and that run's last ``ERROR_LOG_LINES``.

    None for any other state. Queries: 1.
    """
    if trial.state != State.ERROR:
        return None
    run = runs[-1] if runs else None
    logs = TrialLog.objects.filter(trial=trial)
    if run is not None:
        logs = logs.filter(run_id=run.run_id)
    lines = list(logs.order_by("-id")[:ERROR_LOG_LINES])
    lines.reverse()
    return RunError(run=run, lines=lines)


def attach_controls(trial: Trial, checkpoints: Sequence[Checkpoint], user: Any = None) -> None:
    """Set what ``_trial_controls.html`` reads: ``actions``, ``checkpoint_list``, ``can_continue``
    (only the controls ``user`` may use: the trial's owner or an admin).

    ``checkpoint_list`` is the completed checkpoints among ``checkpoints`` (the continue form's
    choices); no query.
    """
    completed = [c for c in checkpoints if c.state == CheckpointState.COMPLETED]
    owner_id = trial.experiment.owner_id
    workspace_id = trial.experiment.project.workspace_id
    trial.actions = trial_actions(  # type: ignore[attr-defined]
        trial, user, owner_id=owner_id, workspace_id=workspace_id
    )
    trial.checkpoint_list = completed  # type: ignore[attr-defined]
    trial.can_continue = trial_can_continue(  # type: ignore[attr-defined]
        trial, completed, user, owner_id, workspace_id
    )
    trial.hparams_flat = flatten_hparams(trial.hparams)  # type: ignore[attr-defined]
