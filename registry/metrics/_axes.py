"""The x-axes of a chart besides steps: epochs and wall time, looked up per returned point."""

from __future__ import annotations

import enum
from collections import defaultdict
from typing import Any

from django.db.models import Min

from registry.models import MetricReport, TrialRun


class XAxis(enum.StrEnum):
    """What the chart's x-axis shows; ``epochs``/``time`` add a per-point array to a series."""

    BATCHES = "batches"
    EPOCHS = "epochs"
    TIME = "time"


def add_x(entries: list[dict[str, Any]], x_axis: XAxis) -> None:
    """Add ``epochs`` or ``elapsed_seconds`` per returned point (one query per group + one).

    Looked up by step in the raw reports, so the cost grows with the points returned.
    """
    wanted: dict[tuple[int, str], set[int]] = defaultdict(set)
    for e in entries:
        wanted[(e["trial_id"], e["group"])].update(e["steps"])
    by_group: dict[str, set[int]] = defaultdict(set)
    trials: dict[str, set[int]] = defaultdict(set)
    for (trial_id, group), steps in wanted.items():
        by_group[group].update(steps)
        trials[group].add(trial_id)
    found: dict[tuple[int, str, int], tuple[float | None, Any]] = {}
    for group, steps in by_group.items():
        if not steps:
            continue
        rows = MetricReport.objects.filter(
            trial_id__in=trials[group], group=group, steps_completed__in=sorted(steps)
        ).values_list("trial_id", "steps_completed", "epoch", "reported_at")
        for trial_id, step, epoch, reported_at in rows:
            found[(trial_id, group, step)] = (epoch, reported_at)
    starts: dict[int, Any] = {}
    if x_axis is XAxis.TIME:
        trial_ids = {trial_id for trial_id, _ in wanted}
        started = (
            TrialRun.objects.filter(trial_id__in=trial_ids, started_at__isnull=False)
            .values("trial_id")
            .annotate(first=Min("started_at"))
        )
        starts = {row["trial_id"]: row["first"] for row in started}
    for e in entries:
        looked = [found.get((e["trial_id"], e["group"], step)) for step in e["steps"]]
        if x_axis is XAxis.EPOCHS:
            e["epochs"] = [x[0] if x else None for x in looked]
        else:
            start = starts.get(e["trial_id"])
            if start is None:  # never started (imported reports): the first report is zero
                start = min((x[1] for x in looked if x), default=None)
            e["elapsed_seconds"] = [
                round((x[1] - start).total_seconds(), 3) if x and start else None for x in looked
            ]
