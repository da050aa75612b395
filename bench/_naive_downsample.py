"""Downsampling of one metric series for charts, keeping each bucket's extremes.

Min/max bucketing (the "M4"-style aggregation of Jugel et al., "M4: A Visualization-Oriented Time
Series Data Aggregation", VLDB 2014, without first/last per bucket): the series is cut into
equal-count buckets by position and each bucket keeps its minimum and maximum point in step
order, so spikes and dips survive at any zoom. Gaps (None for NaN/inf) are kept, one per bucket,
so a chart still shows where a series was not finite.
"""

from __future__ import annotations

from collections.abc import Sequence


def downsample_minmax(
    steps: Sequence[int], values: Sequence[float | None], max_points: int
) -> tuple[list[int], list[float | None]]:
    """Return at most about ``max_points`` points of ``(steps, values)`` in step order.

    Arguments:
        steps (sequence of int): ascending step numbers, same length as ``values``.
        values (sequence of float | None): the series; None marks a gap.
        max_points (int): target size (>= 4); ``0`` or a series already short enough is returned
            unchanged. With gaps the result may hold up to ``1.5 * max_points`` points.

    Raises:
        ValueError: when the lengths differ or ``max_points`` is between 1 and 3.
    """
    n = len(steps)
    if n != len(values):
        raise ValueError(f"steps has {n} items but values has {len(values)}")
    if max_points == 0 or n <= max_points:
        return list(steps), list(values)
    if max_points < 4:
        raise ValueError(f"max_points must be 0 or at least 4, got {max_points}")
    buckets = max_points // 2
    keep: list[int] = [0]
    for b in range(buckets):
        lo = b * n // buckets
        hi = (b + 1) * n // buckets
        lo_i = hi_i = gap_i = None
        lo_v = hi_v = 0.0  # values[lo_i] and values[hi_i], once those are set
        for i in range(lo, hi):
            v = values[i]
            if v is None:
                if gap_i is None:
                    gap_i = i
                continue
            if lo_i is None or v < lo_v:
                lo_i, lo_v = i, v
            if hi_i is None or v > hi_v:
                hi_i, hi_v = i, v
        keep.extend(i for i in {lo_i, hi_i, gap_i} if i is not None)
    keep.append(n - 1)
    ordered = sorted(set(keep))
    return [steps[i] for i in ordered], [values[i] for i in ordered]
