"""Alternating paired runs: the comparison every overhead benchmark here makes.

Two launches per pair, their order swapped every pair, so drift in the machine's load hits both
sides alike; the figure is the median of the per-pair ratios (bench/ddp_overhead.py and the rows
it imports from ``_ddp_torch_trainer`` / ``_ddp_deepspeed``).
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
