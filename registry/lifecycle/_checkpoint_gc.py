"""Checkpoint garbage collection of one experiment: retention, retries, orphaned storage.

A pass (the ``headway.checkpoint_gc`` task: when a trial ends, when the experiment ends, and
on ``POST experiments/{id}/checkpoints/gc/``; step 3 only in the last two):

1. applies the experiment's retention policy (``retention.checkpoints_to_keep``) to its
   COMPLETED checkpoints, sparing protected ones (``selectors.protected_checkpoints``), and
   deletes the files of the rest (``_checkpoint_deletion.delete_checkpoint_files``);
2. retries checkpoints left DELETING or DELETE_FAILED by an earlier pass or delete request;
3. deletes orphans: storage ids under the experiment's ``checkpoint_storage`` that no
   checkpoint row has, older than ``HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS``, whose marker
   names one of this experiment's trials (``registry.lifecycle._orphans``, whose periodic
   sweep applies the same rules to every storage place).

Passes are idempotent and may run in parallel (claims are conditional UPDATEs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.checkpoints.retention import RetentionPolicy, checkpoints_to_keep
from registry.checkpoints.selectors import facts, protected_checkpoints, with_metrics
from registry.lifecycle._checkpoint_deletion import delete_checkpoint_files
from registry.lifecycle._orphans import delete_orphans
from registry.models import Checkpoint, CheckpointState, Experiment, Trial

logger = logging.getLogger("registry.checkpoints")

CHECKPOINT_GC_TASK = "headway.checkpoint_gc"


@dataclass
class GCResult:
    """What one pass did: uuids whose files were deleted, failures, orphans removed."""

    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)


def checkpoints_to_collect(experiment: Experiment) -> list[str]:
    """The COMPLETED checkpoints of ``experiment`` its retention policy does not keep and no
    protection spares (none when its config predates retention)."""
    policy = RetentionPolicy.from_storage_config(experiment.stored_checkpoint_storage())
    if policy is None:
        return []
    live = list(
        with_metrics(
            Checkpoint.objects.filter(trial__experiment=experiment, state=CheckpointState.COMPLETED)
        ).defer("resources", "metadata", "storage")
    )
    keep = checkpoints_to_keep(
        [facts(c, experiment) for c in live], policy, smaller_is_better=experiment.smaller_is_better
    )
    protected = protected_checkpoints(experiment)
    return [str(c.uuid) for c in live if str(c.uuid) not in keep and str(c.uuid) not in protected]


def checkpoint_gc(
    *, experiment_id: int, orphans: bool = True, now: datetime | None = None
) -> GCResult:
    """Run one GC pass over an experiment (see the module docstring); a missing or DELETING
    experiment is left alone (its deletion removes everything).

    Arguments:
        orphans: also look for orphans (step 3). Listing a storage location costs a walk of
            it, so passes after a single trial's end skip it; the experiment's end and a
            request do it.
        now: the time orphans' ages are measured at (default: now).
    """
    experiment = Experiment.objects.without_blobs().filter(id=experiment_id).first()
    if experiment is None or experiment.is_deleted:
        return GCResult()
    collect = checkpoints_to_collect(experiment)
    protected = protected_checkpoints(experiment)
    retry = [
        str(u)
        for u in Checkpoint.objects.filter(
            trial__experiment=experiment,
            state__in=(CheckpointState.DELETING, CheckpointState.DELETE_FAILED),
        ).values_list("uuid", flat=True)
        if str(u) not in protected
    ]
    deleted, failed = delete_checkpoint_files(collect + retry)
    removed: list[str] = []
    if orphans:
        grace = timedelta(seconds=settings.HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS)
        removed = delete_orphans(
            experiment.stored_checkpoint_storage(),
            trial_ids=set(Trial.objects.filter(experiment=experiment).values_list("id", flat=True)),
            grace=grace,
            now=now or timezone.now(),
        )
    if deleted or failed or removed:
        logger.info(
            "checkpoint GC of experiment %s: %d deleted, %d failed, %d orphans removed",
            experiment_id,
            len(deleted),
            len(failed),
            len(removed),
        )
    return GCResult(deleted=deleted, failed=failed, orphans=removed)


def _send_gc_task(experiment_id: int, orphans: bool) -> None:
    current_app.send_task(
        CHECKPOINT_GC_TASK,
        args=[experiment_id],
        kwargs={"orphans": orphans},
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
    )


def request_checkpoint_gc(experiment_id: int, *, orphans: bool = True) -> None:
    """Send ``headway.checkpoint_gc(experiment_id, orphans=orphans)`` once the current
    transaction commits (at once outside one). ``robust``: a broker outage is logged, not
    raised into the transition that already committed; the next trial end or a request runs
    GC again."""
    transaction.on_commit(lambda: _send_gc_task(experiment_id, orphans), robust=True)
