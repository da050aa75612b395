"""Adding user metadata to a registered checkpoint (Determined's ``Checkpoint.add_metadata``)."""

from __future__ import annotations

import uuid as uuid_lib
from typing import Any

from django.db import transaction

from registry.errors import InvalidInput
from registry.jsonsafe import check_json_size
from registry.models import Checkpoint

METADATA_LIMIT_SETTING = "HEADWAY_MAX_CHECKPOINT_METADATA_BYTES"
"""The setting bounding a checkpoint's whole metadata as JSON, at registration and after each
addition here: repeated additions must not grow a row without bound either."""

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
        InvalidInput: naming ``metadata.<key>`` for a changed fixed key.
        PayloadTooLarge: (413) naming ``metadata`` when the merged metadata would exceed
            ``HEADWAY_MAX_CHECKPOINT_METADATA_BYTES`` as JSON.
    """
    with transaction.atomic():
        # Locked so that two additions at once both land (read-merge-write).
        checkpoint = Checkpoint.objects.select_for_update(no_key=True).get(uuid=uuid)
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
        check_json_size(current, field="metadata", setting=METADATA_LIMIT_SETTING)
        checkpoint.metadata = current
        checkpoint.save(update_fields=["metadata"])
    return checkpoint
