"""Checkpoint retention (GC), deletion and per-checkpoint metadata (docs/checkpoints.md).

``retention`` is the pure policy (which checkpoints to keep), ``selectors`` the reads
(metrics at a checkpoint's step, best/latest flags, protections), ``deletion`` the removal of
checkpoint files and of whole experiments, ``gc`` one garbage-collection pass.
"""

from registry.checkpoints.deletion import (
    CheckpointInUse,
    StorageFailure,
    checkpoint_delete,
    delete_checkpoint_files,
    experiment_delete,
    experiment_delete_run,
)
from registry.checkpoints.gc import GCResult, checkpoint_gc, delete_orphans, request_checkpoint_gc
from registry.checkpoints.retention import CheckpointFacts, RetentionPolicy, checkpoints_to_keep
from registry.checkpoints.selectors import attach_metadata, protected_checkpoints, with_metrics

__all__ = [
    "CheckpointFacts",
    "CheckpointInUse",
    "GCResult",
    "RetentionPolicy",
    "StorageFailure",
    "attach_metadata",
    "checkpoint_delete",
    "checkpoint_gc",
    "checkpoints_to_keep",
    "delete_checkpoint_files",
    "delete_orphans",
    "experiment_delete",
    "experiment_delete_run",
    "protected_checkpoints",
    "request_checkpoint_gc",
    "with_metrics",
]
