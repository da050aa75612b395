"""Registering checkpoints whose files are already in storage."""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Callable
from typing import Any

from django.db import transaction

from registry.errors import InvalidInput
from registry.models import Checkpoint, Trial, lock_trial
from registry.storage_locations import resolve_storage

FIELD = "checkpoint_storage"


def checkpoint_register(
    *,
    trial_id: int,
    uuid: uuid_lib.UUID,
    steps_completed: int,
    run_id: int | None,
    resources: dict[str, int],
    metadata: dict[str, Any],
    authorize: Callable[[Trial], None] | None = None,
) -> tuple[Checkpoint, bool]:
    """Register a checkpoint; idempotent on ``uuid``. Returns ``(checkpoint, created)``.

    The trial's ``latest_checkpoint`` follows the checkpoint with the most ``steps_completed``
    (ties: the newest), which is what a resumed or restarted run restores.

    The checkpoint is bound to the trial's own storage location (the experiment's
    ``checkpoint_storage`` resolved against the admin's locations, never a place from the
    request) under a uuid no checkpoint had: downloads and deletion use only that.

    ``authorize(trial)`` is called on the locked trial (its experiment loaded) before anything
    is read or written, so an access check costs no query of its own.

    Raises:
        Trial.DoesNotExist: when the trial is gone.
        Exception: whatever ``authorize`` raises (nothing is written then).
        InvalidInput: when ``uuid`` is already registered for another trial, or the
            experiment's storage is outside the admin's locations (``checkpoint_storage.<field>``,
            an experiment stored before they existed).
    """
    with transaction.atomic():
        trial = lock_trial(trial_id)
        if authorize is not None:
            authorize(trial)
        existing = Checkpoint.objects.filter(uuid=uuid).first()
        if existing is not None:
            if existing.trial_id != trial_id:
                raise InvalidInput({"uuid": ["Already registered for another trial."]})
            return existing, False
        storage = resolve_storage(trial.experiment.stored_checkpoint_storage(), field=FIELD)
        checkpoint = Checkpoint.objects.create(
            uuid=uuid,
            trial=trial,
            run_id=run_id if run_id is not None else trial.run_id,
            steps_completed=steps_completed,
            resources=resources,
            metadata=metadata,
            size=sum(resources.values()),
            storage=storage,
        )
        trial.latest_checkpoint = (
            trial.checkpoints.order_by("-steps_completed", "-created_at")
            .values_list("uuid", flat=True)
            .first()
        )
        trial.save(update_fields=["latest_checkpoint"])
    return checkpoint, True
