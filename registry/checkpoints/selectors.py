"""Reads about checkpoints: the metrics reported at their step, best/latest flags, protections.

Every function costs a fixed number of queries whatever the number of checkpoints: metrics come
from correlated subqueries on ``MetricReport``'s unique ``(trial, group, steps_completed)``
index, so a list page never issues one query per row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import JSONField, OuterRef, QuerySet, Subquery

from headway.metric_values import decode_number
from registry.authz import is_admin, readable_workspaces
from registry.checkpoints.retention import CheckpointFacts, best_first
from registry.models import (
    TERMINAL_STATES,
    Checkpoint,
    CheckpointState,
    Experiment,
    MetricReport,
    ModelVersion,
    Trial,
    blob_fields,
)

TRAINING = "training"
VALIDATION = "validation"


def _validation_at_step() -> Subquery:
    """The ``metrics`` of the validation report at the outer checkpoint's step (or NULL)."""
    validation = MetricReport.objects.filter(
        trial_id=OuterRef("trial_id"), group=VALIDATION, steps_completed=OuterRef("steps_completed")
    ).values("metrics")[:1]
    return Subquery(validation, output_field=JSONField())


def with_metrics(queryset: QuerySet[Checkpoint]) -> QuerySet[Checkpoint]:
    """Annotate ``validation_metrics`` (the validation report at the checkpoint's step, or None)
    and ``training_metrics`` (the latest training report at or before its step, or None), and
    join the trial and its experiment (without the model definition)."""
    training = (
        MetricReport.objects.filter(
            trial_id=OuterRef("trial_id"),
            group=TRAINING,
            steps_completed__lte=OuterRef("steps_completed"),
        )
        .order_by("-steps_completed")
        .values("metrics")[:1]
    )
    return (
        queryset.select_related("trial__experiment")
        .defer(*blob_fields("trial__experiment__"))
        .annotate(
            validation_metrics=_validation_at_step(),
            training_metrics=Subquery(training, output_field=JSONField()),
        )
    )


def searcher_value(checkpoint: Checkpoint, experiment: Experiment) -> float | None:
    """The experiment's searcher metric in the checkpoint's annotated ``validation_metrics``."""
    return _metric_value(getattr(checkpoint, "validation_metrics", None), experiment)


def _metric_value(metrics: dict[str, Any] | None, experiment: Experiment) -> float | None:
    return decode_number((metrics or {}).get(experiment.searcher_metric))


def facts(checkpoint: Checkpoint, experiment: Experiment) -> CheckpointFacts:
    """What the retention policy needs of a checkpoint annotated by ``with_metrics``."""
    return CheckpointFacts(
        uuid=str(checkpoint.uuid),
        trial_id=checkpoint.trial_id,
        steps_completed=checkpoint.steps_completed,
        created_at=checkpoint.created_at,
        searcher_value=searcher_value(checkpoint, experiment),
    )


def best_per_trial(experiments: Mapping[int, Experiment]) -> set[str]:
    """The uuid of each trial's best COMPLETED checkpoint by its experiment's searcher metric
    (trials with no validated checkpoint have none).

    Arguments:
        experiments: trial id -> that trial's experiment (loaded already by the caller).

    One query whatever the number of checkpoints, read as tuples: model instances (a checkpoint,
    its trial and its experiment per row) made every registration and single-checkpoint answer
    cost ~0.15 ms per checkpoint of the trial.
    """
    ids = set(experiments)
    if not ids:
        return set()
    rows = (
        Checkpoint.objects.filter(trial_id__in=ids, state=CheckpointState.COMPLETED)
        .annotate(validation_metrics=_validation_at_step())
        .filter(validation_metrics__isnull=False)
        .values_list("uuid", "trial_id", "steps_completed", "created_at", "validation_metrics")
    )
    by_trial: dict[int, list[CheckpointFacts]] = defaultdict(list)
    for uuid, trial_id, steps_completed, created_at, metrics in rows:
        value = _metric_value(metrics, experiments[trial_id])
        by_trial[trial_id].append(
            CheckpointFacts(str(uuid), trial_id, steps_completed, created_at, value)
        )
    best: set[str] = set()
    for trial_id, checkpoints in by_trial.items():
        ranked = best_first(checkpoints, experiments[trial_id].smaller_is_better)
        if ranked:
            best.add(ranked[0].uuid)
    return best


def attach_metadata(checkpoints: Sequence[Checkpoint]) -> Sequence[Checkpoint]:
    """Set ``validation_metrics``, ``training_metrics``, ``searcher_metric``, ``best`` and
    ``latest`` on each checkpoint (in place); checkpoints not read through ``with_metrics`` get
    their metrics in one extra query. Returns ``checkpoints``."""
    missing = [c.uuid for c in checkpoints if not hasattr(c, "validation_metrics")]
    if missing:
        annotated = {c.uuid: c for c in with_metrics(Checkpoint.objects.filter(uuid__in=missing))}
        for checkpoint in checkpoints:
            if checkpoint.uuid in annotated:
                source = annotated[checkpoint.uuid]
                checkpoint.validation_metrics = source.validation_metrics  # type: ignore[attr-defined]
                checkpoint.training_metrics = source.training_metrics  # type: ignore[attr-defined]
                checkpoint.trial = source.trial
    best = best_per_trial({c.trial_id: c.trial.experiment for c in checkpoints})
    for checkpoint in checkpoints:
        trial = checkpoint.trial
        metrics: dict[str, Any] = checkpoint.validation_metrics or {}  # type: ignore[attr-defined]
        checkpoint.searcher_metric = metrics.get(trial.experiment.searcher_metric)  # type: ignore[attr-defined]
        checkpoint.best = str(checkpoint.uuid) in best  # type: ignore[attr-defined]
        checkpoint.latest = trial.latest_checkpoint == checkpoint.uuid  # type: ignore[attr-defined]
    return checkpoints


def model_versions_holding(checkpoints: QuerySet[Checkpoint], user: Any = None) -> list[str]:
    """``"<model> v<version> (checkpoint <uuid>)"`` for each model version holding one of
    ``checkpoints``, sorted; empty when none does.

    Arguments:
        user: who will read the answer: a version of a model in a workspace where this user
            has no role is ``"a model version in a workspace you have no role in (checkpoint
            <uuid>)"``, naming no model. None: every model is named (background work).
    """
    rows = ModelVersion.objects.filter(checkpoint__in=checkpoints).values_list(
        "model__name", "version", "checkpoint_id", "model__workspace_id"
    )
    readable = None if user is None or is_admin(user) else set(readable_workspaces(user))
    return sorted(
        f"{name} v{version} (checkpoint {uuid})"
        if readable is None or workspace_id in readable
        else f"a model version in a workspace you have no role in (checkpoint {uuid})"
        for name, version, uuid, workspace_id in rows
    )


def protected_checkpoints(experiment: Experiment) -> dict[str, str]:
    """Checkpoints of ``experiment`` that retention must never collect, with why.

    Protected: checkpoints held by a model version; warm-start sources of any trial (a continued
    trial restores it on every restart until its own first checkpoint); each trial's
    ``latest_checkpoint`` while the trial or the experiment has not ended (a resume restores it,
    and a search may resume a COMPLETED trial, as ASHA promotions do). Three queries.
    """
    own = Checkpoint.objects.filter(trial__experiment=experiment)
    why: dict[str, str] = {}
    for name, version, uuid in ModelVersion.objects.filter(checkpoint__in=own).values_list(
        "model__name", "version", "checkpoint_id"
    ):
        why[str(uuid)] = f"held by model {name} version {version}"
    sources = Trial.objects.filter(warm_start_checkpoint__in=own.values("uuid"))
    for trial_id, source in sources.values_list("id", "warm_start_checkpoint"):
        why.setdefault(str(source), f"warm-start source of trial {trial_id}")
    ended = experiment.state in TERMINAL_STATES
    trials = Trial.objects.filter(experiment=experiment, latest_checkpoint__isnull=False)
    for trial_id, state, latest in trials.values_list("id", "state", "latest_checkpoint"):
        if not ended or state not in TERMINAL_STATES:
            why.setdefault(str(latest), f"latest checkpoint of trial {trial_id}, which may resume")
    return why
