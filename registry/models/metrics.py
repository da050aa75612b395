"""``MetricReport``: one ``{name: value}`` report of a trial at one step of one group."""

from django.db import models
from django.utils import timezone


class MetricReport(models.Model):
    """A row per report, not per point: a report of 10 metrics is one insert.

    Ingestion cost is per row, so batched reports of many metrics stay cheap; a series
    (trial, group, name) is read in step order through the unique index below.
    """

    trial = models.ForeignKey("registry.Trial", on_delete=models.CASCADE, related_name="+")
    group = models.CharField(max_length=32)
    steps_completed = models.BigIntegerField()
    run_id = models.PositiveIntegerField(default=0)
    epoch = models.FloatField(null=True, blank=True)
    reported_at = models.DateTimeField(default=timezone.now)
    # Values are JSON; non-finite floats are stored as "NaN" / "Infinity" / "-Infinity".
    metrics = models.JSONField()

    class Meta:
        constraints = [
            # Idempotency of reports (retries, restarts): one row per (trial, group, step);
            # also the index that reads one group of a trial in step order.
            models.UniqueConstraint(
                fields=["trial", "group", "steps_completed"], name="unique_metric_step"
            ),
        ]
