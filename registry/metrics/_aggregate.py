"""Series aggregates in Python: one point, merging, and the multi-resolution bucket levels.

An aggregate is a tuple in ``AGG_FIELDS`` order (the columns of ``SeriesAggregate``). Level
``k`` cuts steps into aligned buckets of ``level_width(k) = BASE_WIDTH * FANOUT**k`` steps; a
bucket of level ``k`` is the merge of its ``FANOUT`` children at level ``k - 1``, so a changed
point updates one bucket per level, and any step range is covered by O(FANOUT * LEVELS) edge
buckets plus the buckets of one level (a segment tree over steps; the same idea as
TimescaleDB's hierarchical continuous aggregates).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import numpy as np

BASE_WIDTH = 32  # steps per level-0 bucket: a ranged read scans at most 2 * 31 raw rows
FANOUT = 8  # children per bucket
LEVELS = 6  # widths 32 .. 1,048,576 steps; longer series read more top-level rows
# Up to this many points in a batch, buckets are merged in Python rather than with numpy.
SMALL_BATCH_POINTS = 16
AGG_FIELDS = (
    "count",
    "first_step",
    "first_value",
    "last_step",
    "last_value",
    "min_step",
    "min_value",
    "max_step",
    "max_value",
    "gap_step",
)
K = TypeVar("K")
Agg = tuple[Any, ...]  # (count, first_step, first_value, ..., gap_step) in AGG_FIELDS order
COUNT, FIRST_STEP, FIRST_VALUE, LAST_STEP, LAST_VALUE = 0, 1, 2, 3, 4
MIN_STEP, MIN_VALUE, MAX_STEP, MAX_VALUE, GAP_STEP = 5, 6, 7, 8, 9


def level_width(level: int) -> int:
    """Steps per bucket at ``level`` (0 .. LEVELS - 1)."""
    return BASE_WIDTH * FANOUT**level


def point(step: int, value: float | None) -> Agg:
    """The aggregate of one point; ``value`` None (not a finite number) makes it a gap."""
    if value is None:
        return (1, step, None, step, None, None, None, None, None, step)
    return (1, step, value, step, value, step, value, step, value, None)


def merge(a: Agg, b: Agg) -> Agg:
    """The aggregate of two disjoint point sets (ties on min/max keep the earlier step)."""
    first = a[1:3] if a[FIRST_STEP] <= b[FIRST_STEP] else b[1:3]
    last = a[3:5] if a[LAST_STEP] >= b[LAST_STEP] else b[3:5]
    if a[MIN_VALUE] is None or (
        b[MIN_VALUE] is not None and (b[MIN_VALUE], b[MIN_STEP]) < (a[MIN_VALUE], a[MIN_STEP])
    ):
        low = b[5:7]
    else:
        low = a[5:7]
    if a[MAX_VALUE] is None or (
        b[MAX_VALUE] is not None
        and (
            b[MAX_VALUE] > a[MAX_VALUE]
            or (b[MAX_VALUE] == a[MAX_VALUE] and b[MAX_STEP] < a[MAX_STEP])
        )
    ):
        high = b[7:9]
    else:
        high = a[7:9]
    gaps = [g for g in (a[GAP_STEP], b[GAP_STEP]) if g is not None]
    return (a[COUNT] + b[COUNT], *first, *last, *low, *high, min(gaps) if gaps else None)


def merge_all(aggs: Iterable[Agg]) -> Agg | None:
    """The merge of any number of aggregates (None for none)."""
    out: Agg | None = None
    for agg in aggs:
        out = agg if out is None else merge(out, agg)
    return out


def level0_aggregates(
    series: np.ndarray, steps: np.ndarray, values: np.ndarray
) -> list[tuple[int, int, Agg]]:
    """The level-0 buckets of points of one or more series: ``[(series, bucket, aggregate)]``.

    Vectorised (numpy) over every series at once, so a batch of many series pays numpy's
    per-call cost once and a bulk load of millions of points costs tens of milliseconds.

    Arguments:
        series: int64 series index of each point.
        steps: int64; points sorted by (series, step), steps distinct within a series.
        values: float64 of the same length; NaN marks a gap (not a finite number).
    """
    n = len(steps)
    if n == 0:
        return []
    keys = steps // BASE_WIDTH
    change = np.empty(n, dtype=bool)
    change[0] = True
    np.not_equal(keys[1:], keys[:-1], out=change[1:])
    change[1:] |= series[1:] != series[:-1]
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, n))
    finite = ~np.isnan(values)
    low = np.minimum.reduceat(np.where(finite, values, np.inf), starts)
    high = np.maximum.reduceat(np.where(finite, values, -np.inf), starts)
    index = np.arange(n)

    def first_index(mask: np.ndarray) -> list[int]:
        """Per bucket, the index of its first point where ``mask`` holds, else ``n``."""
        return np.minimum.reduceat(np.where(mask, index, n), starts).tolist()

    min_at = first_index(finite & (values == np.repeat(low, counts)))
    max_at = first_index(finite & (values == np.repeat(high, counts)))
    gap_at = first_index(~finite)
    step_l, value_l, series_l, key_l = (
        steps.tolist(),
        values.tolist(),
        series.tolist(),
        keys.tolist(),
    )
    out: list[tuple[int, int, Agg]] = []
    for i, (start, count) in enumerate(zip(starts.tolist(), counts.tolist(), strict=True)):
        end = start + count - 1
        first, last = value_l[start], value_l[end]
        lo, hi, gap = min_at[i], max_at[i], gap_at[i]
        agg = (
            count,
            step_l[start],
            None if first != first else first,  # NaN is a gap
            step_l[end],
            None if last != last else last,
            None if lo == n else step_l[lo],
            None if lo == n else value_l[lo],
            None if hi == n else step_l[hi],
            None if hi == n else value_l[hi],
            None if gap == n else step_l[gap],
        )
        out.append((series_l[start], key_l[start], agg))
    return out


def merged(aggs: Iterable[Agg]) -> Agg:
    """``merge_all`` of at least one aggregate.

    Raises:
        ValueError: when ``aggs`` is empty.
    """
    out = merge_all(aggs)
    if out is None:
        raise ValueError("merged() needs at least one aggregate")
    return out


def bucket_aggregates(points: Iterable[tuple[int, float | None]]) -> dict[tuple[int, int], Agg]:
    """Every level's buckets touched by one series' ``points``: ``{(level, bucket): agg}``.

    Arguments:
        points: ``(step, value)`` pairs with distinct steps, any order; value None is a gap.
    """
    return many_bucket_aggregates({0: points})[0]


def many_bucket_aggregates(
    points: Mapping[K, Iterable[tuple[int, float | None]]],
) -> dict[K, dict[tuple[int, int], Agg]]:
    """``bucket_aggregates`` of several series at once: ``{key: {(level, bucket): agg}}``."""
    keys = list(points)
    ordered = [sorted(points[key]) for key in keys]
    total = sum(len(pts) for pts in ordered)
    if total <= SMALL_BATCH_POINTS:
        return {key: by for key, by in zip(keys, map(_few_points_levels, ordered), strict=True)}
    series = np.repeat(np.arange(len(keys), dtype=np.int64), [len(pts) for pts in ordered])
    flat = [p for pts in ordered for p in pts]
    steps = np.fromiter((p[0] for p in flat), dtype=np.int64, count=total)
    values = np.fromiter(
        (np.nan if p[1] is None else p[1] for p in flat), dtype=np.float64, count=total
    )
    by_index = _levels(level0_aggregates(series, steps, values))
    return {key: by_index.get(i, {}) for i, key in enumerate(keys)}


def _few_points_levels(points: list[tuple[int, float | None]]) -> dict[tuple[int, int], Agg]:
    """``bucket_aggregates`` of a few points, sorted by step, merged one by one in Python: the
    same aggregates as ``level0_aggregates`` (ties on min/max keep the earlier step), without
    its ~20 numpy calls, which cost a one-point report about 0.1 ms."""
    level0: dict[int, Agg] = {}
    for step, value in points:
        bucket = step // BASE_WIDTH
        prev = level0.get(bucket)
        level0[bucket] = point(step, value) if prev is None else merge(prev, point(step, value))
    return _levels([(0, bucket, agg) for bucket, agg in level0.items()]).get(0, {})


def aggregates_from_arrays(steps: np.ndarray, values: np.ndarray) -> dict[tuple[int, int], Agg]:
    """``bucket_aggregates`` of one series given as arrays (``level0_aggregates``'s)."""
    series = np.zeros(len(steps), dtype=np.int64)
    return _levels(level0_aggregates(series, steps, values)).get(0, {})


def _levels(level0: list[tuple[int, int, Agg]]) -> dict[int, dict[tuple[int, int], Agg]]:
    """Every level's buckets from level 0's, per series: each bucket merges its children."""
    out: dict[int, dict[tuple[int, int], Agg]] = {}
    below: dict[tuple[int, int], Agg] = {(s, bucket): agg for s, bucket, agg in level0}
    for level in range(LEVELS):
        if level:
            parents: dict[tuple[int, int], Agg] = {}
            for (s, bucket), agg in below.items():
                key = (s, bucket // FANOUT)
                prev = parents.get(key)
                parents[key] = agg if prev is None else merge(prev, agg)
            below = parents
        for (s, bucket), agg in below.items():
            out.setdefault(s, {})[(level, bucket)] = agg
    return out


def chart_points(agg: Agg) -> list[tuple[int, float | None]]:
    """The points that draw ``agg`` faithfully: first, min, max, last and the first gap.

    Deduplicated by step and in step order; at most 5 points.
    """
    pts = {agg[FIRST_STEP]: agg[FIRST_VALUE], agg[LAST_STEP]: agg[LAST_VALUE]}
    if agg[MIN_STEP] is not None:
        pts[agg[MIN_STEP]] = agg[MIN_VALUE]
        pts[agg[MAX_STEP]] = agg[MAX_VALUE]
    if agg[GAP_STEP] is not None:
        pts[agg[GAP_STEP]] = None
    return sorted(pts.items())
