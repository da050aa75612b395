"""Alternating paired runs: the comparison every overhead benchmark here makes.

Two launches per pair, their order swapped every pair, so drift in the machine's load hits both
sides alike; the figure is the median of the per-pair ratios (bench/ddp_overhead.py and the rows
it imports from ``_ddp_torch_trainer`` / ``_ddp_deepspeed``; bench/harness_overhead.py, with CPU
time beside wall time: ``pair_figures``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any


def alternate_pairs(
    baseline: Callable[[], dict[str, Any]], candidate: Callable[[], dict[str, Any]], repeats: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run ``baseline`` and ``candidate`` ``repeats`` times each, in pairs of swapped order.

    Each callable runs one launch and returns its result (at least ``samples_per_s``). Returns
    ``(baseline results, candidate results)``, in pair order.
    """
    base: list[dict[str, Any]] = []
    cand: list[dict[str, Any]] = []
    for i in range(repeats):
        order = (False, True) if i % 2 == 0 else (True, False)
        for is_candidate in order:
            (cand if is_candidate else base).append(candidate() if is_candidate else baseline())
    return base, cand


def ratio_figures(
    base: list[dict[str, Any]], cand: list[dict[str, Any]], name: str, global_batch: int
) -> dict[str, Any]:
    """Medians of samples/s, the median per-pair ratio ``name / raw`` and its range, ms/batch.

    Keys: ``raw_samples_per_s``, ``{name}_samples_per_s``, ``ratio``, ``ratio_range``,
    ``raw_ms_per_batch``, ``{name}_ms_per_batch`` (``global_batch`` records per batch).
    """
    raw = [float(r["samples_per_s"]) for r in base]
    other = [float(r["samples_per_s"]) for r in cand]
    ratios = [o / r for o, r in zip(other, raw, strict=True)]
    return {
        "raw_samples_per_s": round(statistics.median(raw), 1),
        f"{name}_samples_per_s": round(statistics.median(other), 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "raw_ms_per_batch": round(1e3 * global_batch / statistics.median(raw), 2),
        f"{name}_ms_per_batch": round(1e3 * global_batch / statistics.median(other), 2),
    }


def median_range(values: list[float], digits: int = 3) -> tuple[float, list[float]]:
    """``(median, [min, max])`` of ``values``, rounded to ``digits``."""
    return round(statistics.median(values), digits), [
        round(min(values), digits),
        round(max(values), digits),
    ]


Run = Callable[[int], dict[str, Any]]


def warm_then_alternate(
    baseline: Run, candidate: Run, batches: int, repeats: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One short warm-up run of each (``batches // 5``, at least 10), then ``alternate_pairs``
    of ``batches`` each; each callable takes the number of batches to run."""
    baseline(max(batches // 5, 10))
    candidate(max(batches // 5, 10))
    return alternate_pairs(lambda: baseline(batches), lambda: candidate(batches), repeats)


def pair_figures(
    cand: list[dict[str, Any]], raw: list[dict[str, Any]], name: str, batch: int
) -> dict[str, Any]:
    """Per-pair figures of a candidate against raw, from results with ``samples_per_s`` and
    ``cpu_us_per_batch`` (this process's CPU time), ``batch`` samples a batch.

    Keys: ``raw_sps``, ``{name}_sps`` (medians), ``ratio`` and ``ratio_range`` (``name / raw``
    wall), ``overhead_us_per_batch`` (+ ``_range``: wall time a batch over raw),
    ``raw_cpu_us_per_batch``, ``cpu_ratio`` (+ ``_range``: raw CPU / candidate CPU),
    ``cpu_overhead_us_per_batch`` (+ ``_range``, and ``_by_order``: median over the pairs that
    ran raw first, and over those that ran the candidate first).
    """
    pairs = list(zip(cand, raw, strict=True))
    out: dict[str, Any] = {
        "raw_sps": round(statistics.median(r["samples_per_s"] for r in raw), 1),
        f"{name}_sps": round(statistics.median(c["samples_per_s"] for c in cand), 1),
    }
    out["ratio"], out["ratio_range"] = median_range(
        [c["samples_per_s"] / r["samples_per_s"] for c, r in pairs]
    )
    # Wall time per batch, candidate minus raw, per pair (what the 0.97x goal allows: ~11 us).
    out["overhead_us_per_batch"], out["overhead_us_per_batch_range"] = median_range(
        [batch * 1e6 * (1 / c["samples_per_s"] - 1 / r["samples_per_s"]) for c, r in pairs], 1
    )
    # CPU time beside wall: on a busy machine the wall time of a pair's halves can differ by
    # waiting alone; equal CPU with unequal wall is load, not work the candidate does.
    out["raw_cpu_us_per_batch"], _ = median_range([r["cpu_us_per_batch"] for r in raw], 1)
    out["cpu_ratio"], out["cpu_ratio_range"] = median_range(
        [r["cpu_us_per_batch"] / c["cpu_us_per_batch"] for c, r in pairs]
    )
    out["cpu_overhead_us_per_batch"], out["cpu_overhead_us_per_batch_range"] = median_range(
        [c["cpu_us_per_batch"] - r["cpu_us_per_batch"] for c, r in pairs], 1
    )
    # The second run of a pair was seen to cost up to ~15 us a batch more than the first,
    # whichever it was: the figures above need as many pairs of each order (an even
    # repeats), and this shows the effect (even pairs ran raw first).
    out["cpu_overhead_us_per_batch_by_order"] = {
        order: round(
            statistics.median(
                c["cpu_us_per_batch"] - r["cpu_us_per_batch"] for c, r in pairs[first::2]
            ),
            1,
        )
        for order, first in (("raw_first", 0), (f"{name}_first", 1))
        if pairs[first::2]
    }
    return out
