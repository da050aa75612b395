"""Adding user metadata to a registered checkpoint (Determined's ``Checkpoint.add_metadata``)."""

from __future__ import annotations

import json
import uuid as uuid_lib
from typing import Any

from django.db import transaction

from registry.errors import InvalidInput
from registry.models import Checkpoint

MAX_METADATA_BYTES = 256 * 1024
"""Largest a checkpoint's whole metadata may grow to through ``checkpoint_add_metadata``
(as JSON): repeated additions must not grow a row without bound."""

FIXED_KEYS = ("steps_completed",)
"""Keys that describe the checkpoint itself; the SDK resumes from them, so they stay as
registered (a different value is refused; the same value is accepted)."""


def checkpoint_add_metadata(*, uuid: uuid_lib.UUID, metadata: dict[str, Any]) -> Checkpoint:
    """Merge ``metadata`` into the checkpoint's: its top-level keys are added or replace
    existing ones (Determined's ``add_metadata``). ``metadata.json`` in storage is not
    changed (Determined neither): the registry's copy is what ``GET checkpoints/{uuid}/`` and
    ``core_context.checkpoint.get_metadata`` return on the cluster.

    Raises:
        Checkpoint.DoesNotExist: unknown ``uuid``.
        InvalidInput: naming ``metadata.<key>`` for a changed fixed key, or ``metadata`` when
            the merged metadata would exceed ``MAX_METADATA_BYTES``.
    """
    with transaction.atomic():
        # Locked so that two additions at once both land (read-merge-write).
        checkpoint = Checkpoint.objects.select_for_update().get(uuid=uuid)
        current = dict(checkpoint.metadata or {})
        for key in FIXED_KEYS:
            if key in metadata and key in current and metadata[key] != current[key]:
                raise InvalidInput(
                    {
                        f"metadata.{key}": [
                            f"{key} is the checkpoint's own ({current[key]!r}) and cannot be "
                            "changed."
                        ]
                    }
                )
        current.update(metadata)
        size = len(json.dumps(current))
        if size > MAX_METADATA_BYTES:
            raise InvalidInput(
                {
                    "metadata": [
                        f"the checkpoint's metadata would be {size} bytes as JSON; at most "
                        f"{MAX_METADATA_BYTES}."
                    ]
                }
            )
        checkpoint.metadata = current
        checkpoint.save(update_fields=["metadata"])
    return checkpoint
