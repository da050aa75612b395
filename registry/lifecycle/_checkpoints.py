"""Registering checkpoints whose files are already in storage."""

from __future__ import annotations

import functools
import uuid as uuid_lib
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction

from registry.errors import InvalidInput
from registry.models import Checkpoint, Trial, lock_trial
from registry.sql_cursor import prepared_cursor
from registry.storage_locations import resolve_storage

FIELD = "checkpoint_storage"


# Registration's two statements besides the locked read and the INSERT, built once per database
# vendor (as ``lock_trial``'s): through the ORM, compiling them (and the read) was about half a
# registration's server time.
@functools.cache
def _owner_sql(vendor: str) -> str:
    """The trial id of a checkpoint uuid (no row: not registered)."""
    q = connection.ops.quote_name
    return f"SELECT {q('trial_id')} FROM {q(Checkpoint._meta.db_table)} WHERE {q('uuid')} = %s"


@functools.cache
def _latest_sql(vendor: str) -> str:
    """Set a trial's ``latest_checkpoint``: most ``steps_completed``, ties the newest."""
    q = connection.ops.quote_name
    return (
        f"UPDATE {q(Trial._meta.db_table)} SET {q('latest_checkpoint')} = ("
        f"SELECT {q('uuid')} FROM {q(Checkpoint._meta.db_table)} WHERE {q('trial_id')} = %s"
        f" ORDER BY {q('steps_completed')} DESC, {q('created_at')} DESC LIMIT 1)"
        f" WHERE {q('id')} = %s"
    )


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
        with prepared_cursor() as cursor:
            cursor.execute(
                _owner_sql(connection.vendor),
                [Checkpoint._meta.pk.get_db_prep_value(uuid, connection)],
            )
            owner = cursor.fetchone()
        if owner is not None:
            if owner[0] != trial_id:
                raise InvalidInput({"uuid": ["Already registered for another trial."]})
            return Checkpoint.objects.get(uuid=uuid), False
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
        with prepared_cursor() as cursor:
            cursor.execute(_latest_sql(connection.vendor), [trial_id, trial_id])
    return checkpoint, True
