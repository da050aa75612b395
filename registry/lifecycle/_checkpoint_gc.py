"""Checkpoint garbage collection of one experiment: retention, retries, orphaned storage.

A pass (the ``headway.checkpoint_gc`` task: when a trial ends, when the experiment ends, and
on ``POST experiments/{id}/checkpoints/gc/``; step 3 only in the last two):

1. applies the experiment's retention policy (``retention.checkpoints_to_keep``) to its
   COMPLETED checkpoints, sparing protected ones (``selectors.protected_checkpoints``), and
   deletes the files of the rest (``_checkpoint_deletion.delete_checkpoint_files``);
2. retries checkpoints left DELETING or DELETE_FAILED by an earlier pass or delete request;
3. deletes orphans: storage ids under the experiment's ``checkpoint_storage`` that no
   checkpoint row (of any experiment) has, once their newest file is older than
   ``HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS`` (an upload in progress is never taken). Only
   what is provably one of this experiment's own checkpoints is deleted (issue #23): the
   storage must resolve to one of the admin's storage locations (``registry_storage_manager``;
   a stored config outside them is logged and skipped), the id a canonical uuid, and the
   checkpoint's marker (``headway.storage.MARKER_FILE``, written first by every SDK
   ``store_path``) must name that uuid and a trial of this experiment. Other directories or
   keys, even inside the location, are not this experiment's to delete.

Passes are idempotent and may run in parallel (claims are conditional UPDATEs).
"""

from __future__ import annotations

import logging
import uuid as uuid_lib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.checkpoints.retention import RetentionPolicy, checkpoints_to_keep
from registry.checkpoints.selectors import facts, protected_checkpoints, with_metrics
from registry.lifecycle._checkpoint_deletion import delete_checkpoint_files
from registry.models import Checkpoint, CheckpointState, Experiment, State, Trial
from registry.storage_endpoints import registry_storage_manager

logger = logging.getLogger("registry.checkpoints")

CHECKPOINT_GC_TASK = "headway.checkpoint_gc"


@dataclass
class GCResult:
    """What one pass did: uuids whose files were deleted, failures, orphans removed."""

    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)


def _canonical_uuid(storage_id: str) -> bool:
    try:
        return str(uuid_lib.UUID(storage_id)) == storage_id
    except ValueError:
        return False


def delete_orphans(
    storage: dict[str, Any], *, trial_ids: set[int], grace: timedelta, now: datetime
) -> list[str]:
    """Delete storage ids in ``storage`` (a ``checkpoint_storage`` dict, resolved against the
    admin's locations) that are canonical uuids, belong to no ``Checkpoint`` row, whose newest
    file is older than ``now - grace`` and whose marker names one of ``trial_ids``.

    Returns the deleted ids. A storage outside the locations, a backend that cannot list, or
    one that fails, is logged and skipped (the next pass tries again).
    """
    try:
        manager = registry_storage_manager(storage)
        present = manager.list_storage_ids()
    except NotImplementedError:
        return []
    except Exception as exc:  # any backend error (OSError, botocore, a bad config): next pass
        logger.warning("listing checkpoint storage %s for orphans failed: %s", storage, exc)
        return []
    old = {
        sid for sid, modified in present.items() if _canonical_uuid(sid) and modified < now - grace
    }
    registered = {
        str(u) for u in Checkpoint.objects.filter(uuid__in=old).values_list("uuid", flat=True)
    }
    removed = []
    for storage_id in sorted(old - registered):
        try:
            marker = manager.read_marker(storage_id)
            owner = None if marker is None else marker.get("trial_id")
            if type(owner) is not int or owner not in trial_ids:
                continue  # not provably a checkpoint of this experiment's trials: not ours
            manager.delete(storage_id)
        except Exception as exc:  # as above: logged, retried by the next pass
            logger.warning("deleting orphaned checkpoint files %s failed: %s", storage_id, exc)
            continue
        logger.info("deleted orphaned checkpoint files %s (no registered checkpoint)", storage_id)
        removed.append(storage_id)
    return removed


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
    if experiment is None or experiment.state in (State.DELETING, State.DELETED):
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
