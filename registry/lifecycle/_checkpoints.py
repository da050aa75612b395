"""Registering checkpoints whose files are already in storage."""

from __future__ import annotations

import uuid as uuid_lib
from typing import Any

from django.db import transaction

from registry.errors import InvalidInput
from registry.lifecycle._common import lock_trial
from registry.models import Checkpoint


def checkpoint_register(
    *,
    trial_id: int,
    uuid: uuid_lib.UUID,
    steps_completed: int,
    run_id: int | None,
    resources: dict[str, int],
    metadata: dict[str, Any],
) -> tuple[Checkpoint, bool]:
    """Register a checkpoint; idempotent on ``uuid``. Returns ``(checkpoint, created)``.

    The trial's ``latest_checkpoint`` follows the checkpoint with the most ``steps_completed``
    (ties: the newest), which is what a resumed or restarted run restores.

    Raises:
        InvalidInput: when ``uuid`` is already registered for another trial.
    """
    with transaction.atomic():
        trial = lock_trial(trial_id)
        existing = Checkpoint.objects.filter(uuid=uuid).first()
        if existing is not None:
            if existing.trial_id != trial_id:
                raise InvalidInput({"uuid": ["Already registered for another trial."]})
            return existing, False
        checkpoint = Checkpoint.objects.create(
            uuid=uuid,
            trial=trial,
            run_id=run_id if run_id is not None else trial.run_id,
            steps_completed=steps_completed,
            resources=resources,
            metadata=metadata,
            size=sum(resources.values()),
            storage=trial.experiment.config.get("checkpoint_storage", {}),
        )
        latest = trial.checkpoints.order_by("-steps_completed", "-created_at").first()
        trial.latest_checkpoint = latest.uuid if latest else None
        trial.save(update_fields=["latest_checkpoint"])
    return checkpoint, True
