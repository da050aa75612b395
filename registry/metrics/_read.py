"""Chart data from the metric store: any series, any step window, in O(points returned).

A series with at most ``max_points`` points in the window is read from the raw reports (full
resolution). A longer one is read from its buckets: the window is covered by whole buckets of
the finest level that needs at most ``max_points`` of them, plus finer buckets and raw rows at
its ragged edges (``_cover``); those pieces are merged into ``max_points // 4`` equal step
ranges, each drawn by its first, minimum, maximum and last point and its first gap (M4,
Jugel et al., VLDB 2014; W&B's "full fidelity" min/max per x-range bucket). Spikes up and down,
single NaNs and the window's first and last points always survive, at every zoom.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.db.models import Max, Min, Q

from headway.metric_values import chartable
from registry.metrics._aggregate import (
    AGG_FIELDS,
    BASE_WIDTH,
    GAP_STEP,
    LEVELS,
    Agg,
    chart_points,
    level_width,
    point,
)
from registry.metrics._axes import XAxis, add_x
from registry.metrics._band import band_points, ranges
from registry.models import MetricBucket, MetricReport, MetricSeries

RAW_SCAN_FACTOR = 2  # read raw when at most this many rows per point returned are scanned
POINTS_PER_GROUP = 4  # first, min, max, last; a group with a gap draws one more
MAX_STEP = 2**62


@dataclasses.dataclass(frozen=True)
class Window:
    """Which steps to read: ``x_min <= step <= x_max`` and ``step > after_step`` (all optional).

    ``after_step`` is the cursor of a live poll: only what is new since the last answer.
    """

    x_min: int | None = None
    x_max: int | None = None
    after_step: int | None = None

    def bounds(self, first: int, last: int) -> tuple[int, int]:
        """The inclusive step range to read of a series stored over ``[first, last]``."""
        lo = max(
            first, self.x_min or 0, (self.after_step + 1) if self.after_step is not None else 0
        )
        hi = min(last, self.x_max if self.x_max is not None else MAX_STEP)
        return lo, hi

    @property
    def whole(self) -> bool:
        """True when the window is every step (no bound given)."""
        return self.x_min is None and self.x_max is None and self.after_step is None


@dataclasses.dataclass
class _Series:
    id: int
    trial_id: int
    group: str
    name: str
    count: int
    first_step: int
    last_step: int
    lo: int = 0
    hi: int = -1
    level: int | None = None  # None: read raw
    steps: list[int] = dataclasses.field(default_factory=list)
    values: list[float | None] = dataclasses.field(default_factory=list)
    in_window: int = 0
    downsampled: bool = False
    mins: list[float | None] | None = None  # band shape only: each range's extremes
    maxs: list[float | None] | None = None


def read_series(
    *,
    trial_id: int,
    group: str | None = None,
    names: Sequence[str] = (),
    max_points: int = 2000,
    window: Window = Window(),
    x_axis: XAxis = XAxis.BATCHES,
    band: bool = False,
) -> list[dict[str, Any]]:
    """Every ``(group, name)`` series of a trial matching the filters, for charts.

    Arguments:
        group: only this group (``training``, ``validation``, ...); None for all.
        names: only these metric names; empty for all.
        max_points: points per series at most (>= 4), or 0 for every point in the window.
        window: the steps to read (zoom range, live-poll cursor).
        x_axis: ``epochs`` adds ``epochs`` (float or None per point), ``time`` adds
            ``elapsed_seconds`` (since the trial's first run started).
        band: a downsampled series comes as one point per step range (its last) plus
            ``min`` and ``max`` lists (the range's extremes), for a line with a band
            (``registry.metrics._band``), instead of the M4 points.

    Returns:
        ``[{"group", "name", "count", "downsampled", "last_step", "steps", "values"[, ...]}]``
        in ``(group, name)`` order: ``count`` is the stored points in the window, ``last_step``
        the series' last stored step (the next poll's ``after_step``), ``values`` floats or None
        (gaps: NaN, inf, non-numbers). Queries: a bounded handful, whatever the series' length.
    """
    rows = _series_rows(Q(trial_id=trial_id), group, names)
    out = _read(rows, max_points, window, x_axis, band)
    for entry in out:
        del entry["trial_id"]
    return out


def read_experiment_series(
    *,
    experiment_id: int,
    group: str | None = None,
    names: Sequence[str] = (),
    trial_ids: Sequence[int] = (),
    max_points: int = 100,
    window: Window = Window(),
    x_axis: XAxis = XAxis.BATCHES,
    band: bool = False,
) -> list[dict[str, Any]]:
    """``read_series`` for every trial of an experiment (or ``trial_ids`` of it) at once.

    Returns the same entries with ``trial_id``, ordered by trial, group, name. The number of
    queries does not grow with the number of trials (one per distinct plan, at most
    ``2 * LEVELS + 3``).
    """
    where = Q(trial__experiment_id=experiment_id)
    if trial_ids:
        where &= Q(trial_id__in=list(trial_ids))
    return _read(_series_rows(where, group, names), max_points, window, x_axis, band)


def _series_rows(where: Q, group: str | None, names: Sequence[str]) -> list[_Series]:
    qs = MetricSeries.objects.filter(where, count__gt=0)
    if group:
        qs = qs.filter(group=group)
    if names:
        qs = qs.filter(name__in=list(names))
    fields = ("id", "trial_id", "group", "name", "count", "first_step", "last_step")
    return [_Series(*row) for row in qs.order_by("trial_id", "group", "name").values_list(*fields)]


def _read(
    series: list[_Series], max_points: int, window: Window, x_axis: XAxis, band: bool = False
) -> list[dict[str, Any]]:
    raw: list[_Series] = []
    plans: dict[tuple, list[_Series]] = defaultdict(list)
    # Series read from buckets share the window's bounds (over all of them), so series of
    # one level share one plan: the query count does not grow with the number of trials.
    common = window.bounds(
        min((s.first_step for s in series), default=0),
        max((s.last_step for s in series), default=-1),
    )
    density = _row_density(series)
    for s in series:
        s.lo, s.hi = window.bounds(s.first_step, s.last_step)
        if s.lo > s.hi:
            continue
        scan = density.get((s.trial_id, s.group), 1.0) * (s.hi - s.lo + 1)
        if max_points == 0 or (
            _estimated_points(s) <= max_points and scan <= RAW_SCAN_FACTOR * max_points
        ):
            raw.append(s)
        else:
            _plan(s, window, common, max_points, plans)
    _read_raw(raw, max_points, window, common, plans)
    for key, members in plans.items():
        _read_buckets(key, members, max_points, band)
    out = []
    for s in series:
        entry = {
            "trial_id": s.trial_id,
            "group": s.group,
            "name": s.name,
            "count": s.in_window,
            "downsampled": s.downsampled,
            "last_step": s.last_step,
            "steps": s.steps,
            "values": s.values,
        }
        if s.mins is not None:
            entry["min"], entry["max"] = s.mins, s.maxs
        out.append(entry)
    if x_axis is not XAxis.BATCHES:
        add_x(out, x_axis)
    return out


def _plan(
    s: _Series,
    window: Window,
    common: tuple[int, int],
    max_points: int,
    plans: dict[tuple, list[_Series]],
) -> None:
    """Put ``s`` in the bucket plan it shares with the series of its level."""
    if window.whole:
        s.level = _level_for(s.hi - s.lo + 1, max_points)
        plans[("whole", s.level)].append(s)
        return
    s.lo, s.hi = common
    s.level = _level_for(s.hi - s.lo + 1, max_points)
    plans[("window", s.level, s.lo, s.hi)].append(s)


def _row_density(series: list[_Series]) -> dict[tuple[int, str], float]:
    """Raw rows per step of each ``(trial, group)`` read, from its densest series (one query).

    A sparse series (a learning rate every 1,000 steps) shares its rows with dense ones, so
    reading it raw would scan every row of its group: it is read from buckets instead.
    """
    if not series:
        return {}
    keys = {(s.trial_id, s.group) for s in series}
    rows = (
        MetricSeries.objects.filter(
            trial_id__in={t for t, _ in keys}, group__in={g for _, g in keys}
        )
        .values("trial_id", "group")
        .annotate(most=Max("count"), first=Min("first_step"), last=Max("last_step"))
    )
    return {
        (r["trial_id"], r["group"]): r["most"] / (r["last"] - r["first"] + 1)
        for r in rows
        if r["most"]
    }


def _estimated_points(s: _Series) -> float:
    """Points of ``s`` in its window: exact for the whole series, else by mean density."""
    if s.lo <= s.first_step and s.hi >= s.last_step:
        return s.count
    span = s.hi - s.lo + 1
    return min(span, s.count * span / (s.last_step - s.first_step + 1))


def _level_for(span: int, max_points: int) -> int:
    """The finest level covering ``span`` steps with at most ``max_points`` buckets."""
    for level in range(LEVELS):
        if math.ceil(span / level_width(level)) + 1 <= max_points:
            return level
    return LEVELS - 1


def _read_raw(
    series: list[_Series],
    max_points: int,
    window: Window,
    common: tuple[int, int],
    plans: dict[tuple, list[_Series]],
) -> None:
    """Full-resolution points from the raw reports, one query per group for all series.

    A series the density estimate misjudged (more than ``max_points`` in its window) moves to
    the bucket plans instead.
    """
    by_group: dict[str, list[_Series]] = defaultdict(list)
    for s in series:
        by_group[s.group].append(s)
    for group, members in by_group.items():
        wanted = {(s.trial_id, s.name): s for s in members}
        ranges: dict[int, tuple[int, int]] = {}
        for s in members:
            lo, hi = ranges.get(s.trial_id, (s.lo, s.hi))
            ranges[s.trial_id] = (min(lo, s.lo), max(hi, s.hi))
        # Every OR term names the whole index prefix (trial, group, step range), so each is an
        # index range seek; with the group outside the terms both databases scanned every row
        # of the trial's group (a cost growing with the rows stored, not the rows returned).
        where = Q()
        for trial_id, (lo, hi) in ranges.items():
            where |= Q(
                trial_id=trial_id, group=group, steps_completed__gte=lo, steps_completed__lte=hi
            )
        rows = MetricReport.objects.filter(where).order_by("trial_id", "steps_completed")
        names = {s.name for s in members}
        for trial_id, step, metrics in rows.values_list("trial_id", "steps_completed", "metrics"):
            for name in names.intersection(metrics):
                hit = wanted.get((trial_id, name))
                if hit is not None and hit.lo <= step <= hit.hi:
                    hit.steps.append(step)
                    hit.values.append(chartable(metrics[name]))
        for s in members:
            s.in_window = len(s.steps)
            if max_points and s.in_window > max_points:
                s.steps, s.values = [], []
                _plan(s, window, common, max_points, plans)


def _cover(
    lo: int, hi: int, top: int
) -> tuple[dict[int, list[tuple[int, int]]], list[tuple[int, int]]]:
    """Cover steps ``[lo, hi]`` exactly with aligned buckets of levels ``<= top`` and raw ranges.

    Greedy from the left: at each position the coarsest bucket that starts there and fits.
    Returns ``({level: [(first_bucket, last_bucket), ...]}, [(first_step, last_step), ...])``;
    at most ``FANOUT - 1`` buckets per level per edge besides the top level's run, and raw
    ranges shorter than ``BASE_WIDTH`` at both ends.
    """
    runs: dict[int, list[tuple[int, int]]] = defaultdict(list)
    raw: list[tuple[int, int]] = []
    pos = lo
    while pos <= hi:
        for level in range(top, -1, -1):
            width = level_width(level)
            if pos % width == 0 and pos + width - 1 <= hi:
                count = (hi - pos + 1) // width if level == top else 1
                first = pos // width
                level_runs = runs[level]
                if level_runs and level_runs[-1][1] == first - 1:
                    level_runs[-1] = (level_runs[-1][0], first + count - 1)
                else:
                    level_runs.append((first, first + count - 1))
                pos += count * width
                break
        else:
            end = min(hi, (pos // BASE_WIDTH + 1) * BASE_WIDTH - 1)
            raw.append((pos, end))
            pos = end + 1
    return runs, raw


def _read_buckets(key: tuple, members: list[_Series], max_points: int, band: bool) -> None:
    """Downsampled points for series sharing one plan: one bucket query and one raw query."""
    by_id = {s.id: s for s in members}
    ids = list(by_id)
    pieces: dict[int, list[tuple[int, Agg]]] = defaultdict(list)  # id -> [(start step, agg)]
    raw_ranges: list[tuple[int, int]] = []
    if key[0] == "whole":
        level = key[1]
        bucket_q = MetricBucket.objects.filter(series_id__in=ids, level=level)
    else:
        _, level, lo, hi = key
        runs, raw_ranges = _cover(lo, hi, level)
        # The series ids in every OR term: each term is then a seek on the whole index
        # (series, level, bucket range). With them outside the OR, SQLite and PostgreSQL read
        # every bucket of the series and filtered: a zoom cost grew with the points stored
        # (9.4 ms at 1M, 62.5 ms at 10M for the same 2,000 points returned).
        where = Q()
        for run_level, level_runs in runs.items():
            for first, last in level_runs:
                where |= Q(series_id__in=ids, level=run_level, bucket__gte=first, bucket__lte=last)
        bucket_q = MetricBucket.objects.filter(where) if runs else MetricBucket.objects.none()
    widths = [level_width(n) for n in range(LEVELS)]
    # Indexing, not star-unpacking: this loop runs once per bucket of every trial's series.
    for row in bucket_q.values_list("series_id", "level", "bucket", *AGG_FIELDS):
        pieces[row[0]].append((row[2] * widths[row[1]], row[3:]))
    if raw_ranges:
        _raw_pieces(members, raw_ranges, pieces)
    for s in members:
        ordered = sorted(pieces.get(s.id, []), key=lambda p: p[0])
        if band:
            s.in_window, s.steps, s.values, s.mins, s.maxs = band_points(
                ordered, s.lo, s.hi, max_points
            )
            s.downsampled = len(s.steps) < s.in_window
        else:
            _downsample(s, ordered, max_points)


def _raw_pieces(
    members: list[_Series], ranges: list[tuple[int, int]], pieces: dict[int, list[tuple[int, Agg]]]
) -> None:
    """One-point pieces for the raw edge ranges of a window plan."""
    group = members[0].group
    trials = {s.trial_id for s in members}
    where = Q()  # the whole index prefix in each term (see _read_buckets)
    for lo, hi in ranges:
        where |= Q(
            trial_id__in=trials, group=group, steps_completed__gte=lo, steps_completed__lte=hi
        )
    wanted = {(s.trial_id, s.name): s.id for s in members}
    names = {s.name for s in members}
    rows = MetricReport.objects.filter(where).values_list("trial_id", "steps_completed", "metrics")
    for trial_id, step, metrics in rows:
        for name in names.intersection(metrics):
            series_id = wanted.get((trial_id, name))
            if series_id is not None:
                pieces[series_id].append((step, point(step, chartable(metrics[name]))))


def _downsample(s: _Series, pieces: Sequence[tuple[int, Agg]], max_points: int) -> None:
    """Merge ordered pieces into equal step ranges and draw each range by its M4 points."""
    s.in_window = sum(agg[0] for _, agg in pieces)
    per_group = POINTS_PER_GROUP + any(agg[GAP_STEP] is not None for _, agg in pieces)
    groups = max(1, max_points // per_group)
    for merged in ranges(pieces, s.lo, s.hi, groups):
        for step, value in chart_points(merged):
            s.steps.append(step)
            s.values.append(value)
    s.downsampled = len(s.steps) < s.in_window
