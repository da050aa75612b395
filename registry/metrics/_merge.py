"""Reports of steps already stored: merged per metric with the stored report of the same run.

A report of a ``(trial, group, steps_completed)`` that is stored already adds its metrics to
the stored report when both come from the same run, a value it repeats replacing the stored
one (the Hugging Face Trainer logs its training metrics at a step, then its run's summary at
the same step); from another run it replaces the stored report whole (a restarted run
supersedes what the failed run reported after the checkpoint it resumes from). Determined
merges the same way within a run (``addMetricsWithMerge``) but refuses a repeated metric; it
archives an earlier run's reports from the step a later run reports on.

Only what changed is recomputed: a metric the step did not hold is a new point of its series
(appended, as a new step is), a repeated metric with the same value (a retried batch) changes
nothing, and only a changed or removed value rebuilds its series' buckets around that step
(``registry.metrics._store.rebuild``). Batches of steps above the stored high-water mark (the
common path) never come here and read nothing.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from registry.metrics._batch import group_high_water
from registry.models import MetricReport

SeriesKey = tuple[str, str]  # (group, name)
Stored = dict[tuple[str, int], tuple[int, dict[str, Any]]]  # (group, step) -> (run_id, metrics)


class Merged(NamedTuple):
    """A batch's writes once merged with the reports stored at its steps (``merge_stored``).

    Attributes:
        rows: the raw rows to upsert, their metrics merged with the stored ones of their run.
        points: ``{(group, name): [(step, value)]}`` of the points never stored (to append).
        rebuild: ``{group: (steps, names)}``: the series whose stored point at one of those
            steps changed or went away.
    """

    rows: list[tuple]
    points: dict[SeriesKey, list[tuple[int, float | None]]]
    rebuild: dict[str, tuple[set[int], set[str]]]


def stored_reports(trial_id: int, summary: dict, steps: dict[str, list[int]]) -> Stored:
    """The stored ``(run_id, metrics)`` of the batch's ``steps`` (``{group: [step]}``) that
    may be stored: those at or below their group's high-water mark (``group_high_water``).

    No query when every step lies above it (training going forward); else one, on the unique
    key ``(trial, group, steps_completed)``. A stored report without metrics above the mark is
    not read: replacing it whole is merging with it.
    """
    out: Stored = {}
    for group, group_steps in steps.items():
        high = group_high_water(summary, group)
        below = [s for s in group_steps if s <= high]
        if not below:
            continue
        rows = MetricReport.objects.filter(
            trial_id=trial_id, group=group, steps_completed__in=below
        ).values_list("steps_completed", "run_id", "metrics")
        for step, run_id, metrics in rows:
            out[(group, step)] = (run_id, metrics)
    return out


def _same(old: Any, new: Any) -> bool:
    """Whether a stored value and a re-reported one are the same point (types too: ``True``
    and ``1`` are equal in Python but not stored alike)."""
    return type(old) is type(new) and old == new


def merge_stored(
    rows: list[tuple],
    points: dict[SeriesKey, list[tuple[int, float | None]]],
    stored: Stored,
) -> Merged:
    """Merge the batch's raw ``rows`` and chartable ``points`` (``encoded_rows``) with the
    ``stored`` reports of their steps (``stored_reports``), per metric.

    A row of the same run as the stored one keeps the stored metrics it does not repeat; of
    another run, it replaces them. A point is appended only where its series had none at that
    step; a point that differs from the stored one, or a stored point the row drops, marks its
    series and step for ``rebuild``.
    """
    merged_rows: list[tuple] = []
    kept: set[tuple[str, str, int]] = set()  # (group, name, step) already stored: not appended
    rebuild: dict[str, tuple[set[int], set[str]]] = {}
    for row in rows:
        group, step, run_id, metrics = row[1], row[2], row[3], row[6]
        old = stored.get((group, step))
        if old is None:
            merged_rows.append(row)
            continue
        old_run, old_metrics = old
        changed = [
            n for n, v in metrics.items() if n in old_metrics and not _same(old_metrics[n], v)
        ]
        if old_run == run_id:
            merged_rows.append((*row[:6], {**old_metrics, **metrics}))
        else:
            changed += [n for n in old_metrics if n not in metrics]
            merged_rows.append(row)
        kept.update((group, n, step) for n in metrics if n in old_metrics)
        if changed:
            steps, names = rebuild.setdefault(group, (set(), set()))
            steps.add(step)
            names.update(changed)
    if kept:
        points = {
            (group, name): [(s, v) for s, v in pts if (group, name, s) not in kept]
            for (group, name), pts in points.items()
        }
    return Merged(merged_rows, points, rebuild)
