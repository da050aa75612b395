"""``Checkpoint``: files a trial wrote to checkpoint storage, registered after upload."""

from typing import ClassVar

from django.db import models
from django.utils import timezone


class CheckpointState(models.TextChoices):
    COMPLETED = "COMPLETED"
    # Retention or a delete request took it; files are being removed from storage.
    DELETING = "DELETING"
    # Files removed from storage; the row stays so metrics and lineage keep their reference.
    DELETED = "DELETED"
    # Removing the files failed (see the log); a later GC pass retries.
    DELETE_FAILED = "DELETE_FAILED"


class Checkpoint(models.Model):
    uuid = models.UUIDField(primary_key=True)
    trial = models.ForeignKey(
        "registry.Trial", on_delete=models.CASCADE, related_name="checkpoints"
    )
    run_id = models.PositiveIntegerField(default=0)
    steps_completed = models.BigIntegerField()
    state = models.CharField(
        max_length=16, choices=CheckpointState.choices, default=CheckpointState.COMPLETED
    )
    # {relative path: size in bytes}
    resources = models.JSONField(default=dict)
    metadata = models.JSONField(default=dict)
    size = models.PositiveBigIntegerField(default=0)
    # Snapshot of the experiment's checkpoint_storage, so later config changes can't orphan it.
    storage = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["-steps_completed", "-created_at"]
        indexes: ClassVar[list[models.Index]] = [models.Index(fields=["trial", "steps_completed"])]

    def __str__(self) -> str:
        return f"Checkpoint {self.uuid} (trial {self.trial_id}, step {self.steps_completed})"
