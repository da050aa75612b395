"""``TrialLog``: lines a trial's process printed, captured by the worker."""

from typing import ClassVar

from django.db import models
from django.utils import timezone


class TrialLog(models.Model):
    trial = models.ForeignKey("registry.Trial", on_delete=models.CASCADE, related_name="+")
    run_id = models.PositiveIntegerField(default=0)
    timestamp = models.DateTimeField(default=timezone.now)
    message = models.TextField()

    class Meta:
        ordering: ClassVar[list[str]] = ["id"]
        # `logs/?after=<id>` reads a trial's lines in id order.
        indexes: ClassVar[list[models.Index]] = [models.Index(fields=["trial", "id"])]
