"""``SlurmNode``: a Slurm node as Headway's own jobs found it, and whether they avoid it."""

from __future__ import annotations

from typing import ClassVar

from django.db import models


class SlurmNode(models.Model):
    """One node of a slurm pool that Headway's jobs ran on and failed to start a run on.

    Headway is a Slurm user, not its admin: it never drains a node in Slurm. It counts, per
    node, runs whose job ended on it before their ranks started (``failed_starts``, in a row:
    a run that starts there resets it) and, at ``HEADWAY_HOST_MAX_FAILED_STARTS``, stops
    sending its own jobs there (``excluded_reason`` set: ``sbatch --exclude``) until an admin
    enables it again (``registry.slurm._nodes``). A row exists only for a node that had a
    failed start; ``namespace`` is the registry's (``HEADWAY_QUEUE``), as on ``WorkerHost``.
    """

    namespace = models.CharField(max_length=200, default="")
    pool = models.CharField(max_length=200)
    # Slurm's node name (NodeName), as `scontrol show hostnames` expands a job's node list.
    name = models.CharField(max_length=200)
    failed_starts = models.PositiveIntegerField(default=0)
    # Non-empty while excluded: why (shown with the pool), set by the master alone.
    excluded_reason = models.CharField(max_length=500, blank=True, default="")
    excluded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering: ClassVar[list[str]] = ["pool", "name"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["namespace", "pool", "name"], name="slurm_node_unique_per_pool"
            )
        ]

    def __str__(self) -> str:
        state = "excluded" if self.excluded_reason else f"{self.failed_starts} failed start(s)"
        return f"Slurm node {self.name} of pool {self.pool} ({state})"
