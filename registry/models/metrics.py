"""Metric storage: raw reports, and per-series aggregates at several resolutions.

``MetricReport`` keeps every report as it came (one row per ``{name: value}`` report). Charts
never scan it for long series: ``MetricSeries`` (one row per ``(trial, group, name)``) and
``MetricBucket`` (the same aggregate per aligned step range, at ``registry.metrics`` levels of
widths 32, 256, 2048, ... steps) are maintained at ingestion, so a read touches O(points
returned) rows whatever the series' length (docs/internals.md "Metric store").
"""

from typing import ClassVar

from django.db import models
from django.utils import timezone


class MetricReport(models.Model):
    """A row per report, not per point: a report of 10 metrics is one insert.

    Ingestion cost is per row, so batched reports of many metrics stay cheap; a series
    (trial, group, name) is read in step order through the unique index below.
    """

    # No index of its own: the unique constraint's (trial, ...) prefix serves every lookup by
    # trial, and each index is one more insert (and WAL record) per report.
    trial = models.ForeignKey(
        "registry.Trial", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    group = models.CharField(max_length=32)
    steps_completed = models.BigIntegerField()
    run_id = models.PositiveIntegerField(default=0)
    epoch = models.FloatField(null=True, blank=True)
    reported_at = models.DateTimeField(default=timezone.now)
    # Values are JSON; non-finite floats are stored as "NaN" / "Infinity" / "-Infinity".
    metrics = models.JSONField()

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # Idempotency of reports (retries, restarts): one row per (trial, group, step);
            # also the index that reads one group of a trial in step order.
            models.UniqueConstraint(
                fields=["trial", "group", "steps_completed"], name="unique_metric_step"
            ),
        ]


class SeriesAggregate(models.Model):
    """What a chart needs of a run of points: count, first, last, extremes, first gap.

    ``min``/``max`` are over finite numbers only (None when there is none); a gap is a point
    whose value is not a finite number (NaN, inf, a string), charted as a break in the line.
    This is the M4 aggregate (Jugel et al., VLDB 2014) plus the first gap, so a spike up, a
    spike down and a single NaN all survive downsampling.
    """

    count = models.BigIntegerField()
    first_step = models.BigIntegerField()
    first_value = models.FloatField(null=True)
    last_step = models.BigIntegerField()
    last_value = models.FloatField(null=True)
    min_step = models.BigIntegerField(null=True)
    min_value = models.FloatField(null=True)
    max_step = models.BigIntegerField(null=True)
    max_value = models.FloatField(null=True)
    gap_step = models.BigIntegerField(null=True)

    class Meta:
        abstract = True


class MetricSeries(SeriesAggregate):
    """One metric of one group of a trial, with the aggregate of all its points."""

    # Indexed by the unique constraint's prefix, as MetricReport.trial.
    trial = models.ForeignKey(
        "registry.Trial", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    group = models.CharField(max_length=32)
    name = models.CharField(max_length=256)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["trial", "group", "name"], name="unique_metric_series"),
        ]


class MetricBucket(SeriesAggregate):
    """The aggregate of a series' points in steps ``[bucket * w, (bucket + 1) * w)``.

    ``w`` is the level's width (``registry.metrics.level_width``). The composite primary key is
    also the only index: reads ask for one series, one level, a range of buckets.
    """

    pk = models.CompositePrimaryKey("series_id", "level", "bucket")
    series = models.ForeignKey(
        MetricSeries, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    level = models.SmallIntegerField()
    bucket = models.BigIntegerField()
