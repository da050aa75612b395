"""Downsampled chart data as a line with a band: one point per step range plus its extremes.

The overview charts (``static/js/charts.js``) draw a long series as W&B does: a line through
each step range's last value with a shaded band from the range's minimum to its maximum, not a
zigzag through every extreme (``_read._downsample``'s M4 points). The pieces are the same
(buckets of the metric store and raw rows at ragged edges), merged into ``max_points`` equal step
ranges; a range holding a gap (NaN, inf) gives one more point, ``None``, at its first gap, so
the line breaks there as it does in the M4 shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from registry.metrics._aggregate import (
    COUNT,
    GAP_STEP,
    LAST_STEP,
    LAST_VALUE,
    MAX_VALUE,
    MIN_VALUE,
    Agg,
    merge,
)


def ranges(pieces: Sequence[tuple[int, Agg]], lo: int, hi: int, groups: int) -> list[Agg]:
    """Merge step-ordered ``pieces`` (``(start step, aggregate)``) into at most ``groups`` equal
    step ranges of ``[lo, hi]``; returns the aggregate of each non-empty range, in step order.

    Pieces arrive sorted by start, so a range's pieces are consecutive: one pass, no sort.
    """
    span = hi - lo + 1
    out: list[Agg] = []
    index = -1
    for start, agg in pieces:
        at = min(groups - 1, (max(start, lo) - lo) * groups // span)
        if at != index:
            out.append(agg)
            index = at
        else:
            out[-1] = merge(out[-1], agg)
    return out


def band_points(
    pieces: Sequence[tuple[int, Agg]], lo: int, hi: int, max_points: int
) -> tuple[int, list[int], list[float | None], list[float | None], list[float | None]]:
    """The band shape of one series' window ``[lo, hi]`` from its step-ordered ``pieces``.

    Returns:
        ``(count, steps, values, mins, maxs)``: ``count`` the points stored in the window; per
        range its last step and value and its minimum and maximum finite values (``None`` when
        it has none); a range with a gap first gives ``(gap step, None, None, None)``. At most
        ``max_points`` points.
    """
    has_gap = any(agg[GAP_STEP] is not None for _, agg in pieces)
    groups = max(1, max_points // (2 if has_gap else 1))
    steps: list[int] = []
    values: list[float | None] = []
    mins: list[float | None] = []
    maxs: list[float | None] = []
    count = 0
    for agg in ranges(pieces, lo, hi, groups):
        count += agg[COUNT]
        gap = agg[GAP_STEP]
        if gap is not None and gap != agg[LAST_STEP]:
            steps.append(gap)
            values.append(None)
            mins.append(None)
            maxs.append(None)
        steps.append(agg[LAST_STEP])
        values.append(agg[LAST_VALUE])
        mins.append(agg[MIN_VALUE])
        maxs.append(agg[MAX_VALUE])
    return count, steps, values, mins, maxs
