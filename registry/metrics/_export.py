"""Raw export of a trial's stored points, streamed (CSV endpoint, CLI)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from registry.models import MetricReport


def stream_rows(
    trial_id: int, group: str | None = None, names: Iterable[str] = ()
) -> Iterable[tuple[str, str, int, Any, float | None, Any, int]]:
    """Every stored point of a trial, in (group, step, name) order, without holding them all.

    Yields ``(group, name, steps_completed, value, epoch, reported_at, run_id)``; ``value``
    as stored (numbers, ``"NaN"``/``"Infinity"`` strings, any JSON value).
    """
    rows = MetricReport.objects.filter(trial_id=trial_id)
    if group:
        rows = rows.filter(group=group)
    wanted = set(names)
    ordered = rows.order_by("group", "steps_completed").values_list(
        "group", "steps_completed", "metrics", "epoch", "reported_at", "run_id"
    )
    for row_group, step, metrics, epoch, reported_at, run_id in ordered.iterator(chunk_size=5000):
        for name in sorted(metrics):
            if not wanted or name in wanted:
                yield row_group, name, step, metrics[name], epoch, reported_at, run_id
