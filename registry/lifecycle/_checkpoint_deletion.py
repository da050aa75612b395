"""Deleting checkpoints (their files, keeping a DELETED row) and whole experiments.

A checkpoint goes COMPLETED → DELETING (claimed by a conditional UPDATE, so parallel passes
and retried tasks are harmless) → DELETED once ``StorageManager.delete`` removed its files, or
DELETE_FAILED when storage failed (a later GC pass retries). A checkpoint held by a model
version is never claimed, whatever asked for it.

An experiment goes (terminal or DELETE_FAILED) → DELETING on ``DELETE experiments/{id}/``; the
``headway.experiment_delete`` task deletes its stored checkpoints, then its rows (trials,
checkpoints, metrics, logs, runs): the experiment is gone, or DELETE_FAILED with
``delete_error`` set.
"""

from __future__ import annotations

import logging
import uuid as uuid_lib
from collections.abc import Iterable
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import ProtectedError

from registry.checkpoints.selectors import model_versions_holding
from registry.errors import IllegalTransition, RegistryError
from registry.lifecycle._artifacts import delete_artifacts
from registry.models import TERMINAL_STATES, Checkpoint, CheckpointState, Experiment, State, Trial
from registry.storage_endpoints import registry_storage_manager

logger = logging.getLogger("registry.checkpoints")

# States whose files may still be (partly) in storage and may be claimed for deletion.
_CLAIMABLE = (CheckpointState.COMPLETED, CheckpointState.DELETING, CheckpointState.DELETE_FAILED)
EXPERIMENT_DELETE_TASK = "headway.experiment_delete"


class CheckpointInUse(RegistryError):
    """409: the checkpoint (or one of the experiment's) is held or still needed."""

    status = 409


class StorageFailure(RegistryError):
    """502: checkpoint storage refused or failed a delete; the checkpoint is DELETE_FAILED."""

    status = 502


def delete_checkpoint_files(
    uuids: Iterable[str | uuid_lib.UUID],
) -> tuple[list[str], dict[str, str]]:
    """Delete the stored files of these checkpoints and mark them DELETED.

    Rows already DELETED, unknown uuids and checkpoints held by a model version are skipped.

    Returns:
        ``(deleted uuids, {uuid: error})``; a failed checkpoint is left DELETE_FAILED.
    """
    wanted = {str(u) for u in uuids}
    if not wanted:
        return [], {}
    claimable = Checkpoint.objects.filter(uuid__in=wanted, state__in=_CLAIMABLE).exclude(
        model_versions__isnull=False
    )
    Checkpoint.objects.filter(uuid__in=claimable.values("uuid")).update(
        state=CheckpointState.DELETING
    )
    # A registration that committed while the UPDATE above waited for its row lock is not seen
    # by that statement's subquery (PostgreSQL does not re-run it): give such rows back.
    Checkpoint.objects.filter(
        uuid__in=wanted, state=CheckpointState.DELETING, model_versions__isnull=False
    ).update(state=CheckpointState.COMPLETED)
    claimed = Checkpoint.objects.filter(uuid__in=wanted, state=CheckpointState.DELETING).exclude(
        model_versions__isnull=False
    )
    deleted: list[str] = []
    failed: dict[str, str] = {}
    for uuid, storage in claimed.values_list("uuid", "storage"):
        try:
            registry_storage_manager(storage).delete(str(uuid))
        except Exception as exc:  # any backend error (OSError, botocore, a bad config): recorded
            logger.warning("deleting the files of checkpoint %s failed: %s", uuid, exc)
            failed[str(uuid)] = f"{type(exc).__name__}: {exc}"
            Checkpoint.objects.filter(uuid=uuid, state=CheckpointState.DELETING).update(
                state=CheckpointState.DELETE_FAILED
            )
            continue
        Checkpoint.objects.filter(uuid=uuid, state=CheckpointState.DELETING).update(
            state=CheckpointState.DELETED
        )
        deleted.append(str(uuid))
    return deleted, failed


def _warm_started_trials(checkpoints, exclude_experiment: int | None = None) -> list[int]:
    """Unfinished trials warm-starting from one of ``checkpoints`` (a queryset)."""
    trials = Trial.objects.filter(warm_start_checkpoint__in=checkpoints.values("uuid")).exclude(
        state__in=TERMINAL_STATES
    )
    if exclude_experiment is not None:
        trials = trials.exclude(experiment_id=exclude_experiment)
    return sorted(trials.values_list("id", flat=True))


def checkpoint_delete(*, uuid: uuid_lib.UUID, user: Any = None) -> Checkpoint:
    """Delete one checkpoint's files now; its row stays, DELETED. A DELETED one is a no-op.

    Raises:
        Checkpoint.DoesNotExist: unknown uuid.
        CheckpointInUse: (409) held by a model version (naming model and version, unless
            ``user``, who asked, has no role in the model's workspace), the latest
            checkpoint of a trial that has not ended, or the warm-start source of one.
        StorageFailure: (502) storage failed; the checkpoint is DELETE_FAILED (retry later).
    """
    # No lock: the claim in delete_checkpoint_files is conditional and skips a checkpoint a
    # model version took meanwhile (the one protection that must hold under a race).
    checkpoint = Checkpoint.objects.select_related("trial").get(uuid=uuid)
    if checkpoint.state == CheckpointState.DELETED:
        return checkpoint
    this = Checkpoint.objects.filter(uuid=uuid)
    holders = model_versions_holding(this, user)
    if holders:
        raise CheckpointInUse(
            f"Checkpoint {uuid} is held by model version {', '.join(holders)}; "
            "delete the model version first."
        )
    trial = checkpoint.trial
    if trial.latest_checkpoint == checkpoint.uuid and trial.state not in TERMINAL_STATES:
        raise CheckpointInUse(
            f"Checkpoint {uuid} is the latest checkpoint of trial {trial.id}, which is "
            f"{trial.state}: resuming it restores this checkpoint."
        )
    users = _warm_started_trials(this)
    if users:
        raise CheckpointInUse(
            f"Checkpoint {uuid} is the warm-start source of trial(s) "
            f"{', '.join(map(str, users))}, which have not ended."
        )
    _, failed = delete_checkpoint_files([uuid])
    checkpoint.refresh_from_db()
    if failed:
        raise StorageFailure(
            f"Deleting the files of checkpoint {uuid} failed ({failed[str(uuid)]}); "
            "it is DELETE_FAILED and the next GC pass retries."
        )
    return checkpoint


def _send_delete_task(experiment_id: int) -> None:
    current_app.send_task(
        EXPERIMENT_DELETE_TASK, args=[experiment_id], queue=settings.CELERY_TASK_DEFAULT_QUEUE
    )


def experiment_delete(*, experiment_id: int, user: Any = None) -> Experiment:
    """Start deleting an ended experiment: DELETING now, the work in a Celery task after commit.

    Deleting a DELETING experiment is a no-op; a DELETE_FAILED one is tried again.

    Raises:
        Experiment.DoesNotExist: unknown id.
        IllegalTransition: (409) the experiment has not ended.
        CheckpointInUse: (409) a model version holds one of its checkpoints (naming the model
            unless ``user``, who asked, has no role in its workspace),
            or an unfinished trial of another experiment warm-starts from one.
    """
    with transaction.atomic():
        experiment = (
            Experiment.objects.select_for_update(no_key=True).without_blobs().get(id=experiment_id)
        )
        if experiment.state == State.DELETING:
            return experiment
        if experiment.state not in TERMINAL_STATES | {State.DELETE_FAILED}:
            raise IllegalTransition(
                f"experiment {experiment.id} is {experiment.state}; it can be deleted only when "
                "COMPLETED, CANCELED, ERROR or DELETE_FAILED (kill or cancel it first)"
            )
        own = Checkpoint.objects.filter(trial__experiment=experiment)
        holders = model_versions_holding(own, user)
        if holders:
            raise CheckpointInUse(
                f"Experiment {experiment.id} has checkpoints held by model version "
                f"{', '.join(holders)}; delete those model versions first."
            )
        users = _warm_started_trials(own, exclude_experiment=experiment.id)
        if users:
            raise CheckpointInUse(
                f"Unfinished trial(s) {', '.join(map(str, users))} warm-start from checkpoints "
                f"of experiment {experiment.id}."
            )
        experiment.state = State.DELETING
        experiment.delete_error = ""
        experiment.save(update_fields=["state", "delete_error"])
        transaction.on_commit(lambda: _send_delete_task(experiment_id), robust=True)
    return experiment


def _delete_failed(experiment_id: int, error: str) -> None:
    logger.warning("deleting experiment %s failed: %s", experiment_id, error)
    # A locked row and save(), not a bulk UPDATE: the state change must reach the model's
    # signals (webhooks' experiment.state_changed) like every other.
    with transaction.atomic():
        experiment = (
            Experiment.objects.select_for_update(no_key=True)
            .without_blobs()
            .filter(id=experiment_id, state=State.DELETING)
            .first()
        )
        if experiment is None:
            return
        experiment.state, experiment.delete_error = State.DELETE_FAILED, error[:10000]
        experiment.save(update_fields=["state", "delete_error"])


def experiment_delete_run(*, experiment_id: int) -> bool:
    """The task's work: delete a DELETING experiment's stored checkpoints (and an unmanaged
    one's MLflow artifacts), then its rows.

    Idempotent: an experiment that is gone or not DELETING is left alone. Returns True when
    the rows are gone; False when nothing was to do or it failed (then it is DELETE_FAILED
    with ``delete_error`` naming the checkpoints and the storage errors).
    """
    if not Experiment.objects.filter(id=experiment_id, state=State.DELETING).exists():
        return False
    own = Checkpoint.objects.filter(trial__experiment_id=experiment_id)
    _, failed = delete_checkpoint_files(
        own.exclude(state=CheckpointState.DELETED).values_list("uuid", flat=True)
    )
    if failed:
        errors = "; ".join(f"checkpoint {uuid}: {error}" for uuid, error in sorted(failed.items()))
        _delete_failed(experiment_id, f"Deleting stored checkpoints failed: {errors}")
        return False
    # An unmanaged experiment's MLflow artifacts (registry.lifecycle._artifacts).
    row = Experiment.objects.filter(id=experiment_id).values_list("unmanaged", "config").first()
    if row is not None and row[0]:
        failed_runs = delete_artifacts(experiment_id, (row[1] or {}).get("checkpoint_storage"))
        if failed_runs:
            errors = "; ".join(f"trial {t}: {e}" for t, e in sorted(failed_runs.items()))
            _delete_failed(experiment_id, f"Deleting MLflow artifacts failed: {errors}")
            return False
    try:
        with transaction.atomic():
            experiment = Experiment.objects.select_for_update().filter(id=experiment_id).first()
            if experiment is None or experiment.state != State.DELETING:
                return False
            experiment.delete()  # trials, checkpoints, runs, metrics and logs cascade
    except ProtectedError:
        holders = model_versions_holding(own)
        _delete_failed(
            experiment_id,
            f"Checkpoints are held by model version {', '.join(holders) or '(unknown)'}.",
        )
        return False
    return True
