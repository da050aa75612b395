"""Checkpoint retention policy, reads and per-checkpoint metadata (docs/checkpoints.md).

``retention`` is the pure policy (which checkpoints to keep), ``selectors`` the reads
(metrics at a checkpoint's step, best/latest flags, protections), ``metadata`` the user's
metadata. What changes a checkpoint's or an experiment's state (deleting files and whole
experiments, a garbage-collection pass) is ``registry.lifecycle``'s, which uses these; this
package never imports the lifecycle.
"""

from registry.checkpoints.retention import CheckpointFacts, RetentionPolicy, checkpoints_to_keep
from registry.checkpoints.selectors import attach_metadata, protected_checkpoints, with_metrics

__all__ = [
    "CheckpointFacts",
    "RetentionPolicy",
    "attach_metadata",
    "checkpoints_to_keep",
    "protected_checkpoints",
    "with_metrics",
]
