"""``adaptive_asha``: ASHA over several brackets, as Determined's ``adaptive_asha``.

Brackets follow Determined's ``adaptive_asha.go``: ``mode`` picks the brackets' rung counts and
``max_concurrent_trials`` is split evenly over them (more aggressive brackets first); trials are
split by ``HalvingSearch``.
"""

from __future__ import annotations

import math

from headway.expconf import AdaptiveASHASearcherConfig
from registry.searcher._asha import HalvingConfig, HalvingSearch


def bracket_rungs(max_rungs: int, mode: str) -> list[int]:
    """Rung counts of the brackets of ``mode`` (Determined's adaptive modes), most rungs first.

    >>> bracket_rungs(5, "standard")
    [5, 4, 3]
    """
    if mode == "aggressive":
        rungs = [max_rungs]
    elif mode == "standard":
        rungs = list(range((max_rungs - 1) // 2 + 1, max_rungs + 1))
    elif mode == "conservative":
        rungs = list(range(1, max_rungs + 1))
    else:
        raise ValueError(f"searcher.mode {mode!r}: use aggressive, standard or conservative")
    return sorted(rungs, reverse=True)


def bracket_max_concurrent(max_concurrent: int, divisor: float, trials: list[int]) -> list[int]:
    """Split ``max_concurrent_trials`` evenly over brackets, the remainder to the first ones;
    0 (no limit) gives each bracket ``max(trials of the last bracket, divisor)``."""
    count = len(trials)
    if max_concurrent == 0:
        return [max(trials[-1], int(divisor))] * count
    max_concurrent = max(max_concurrent, count)
    share, remainder = divmod(max_concurrent, count)
    return [share + (1 if i < remainder else 0) for i in range(count)]


class AdaptiveASHASearch(HalvingSearch):
    """Brackets of ``bracket_rungs`` (or those of ``mode`` with at most ``max_rungs`` rungs),
    run side by side."""

    def rungs(self, searcher: HalvingConfig) -> list[int]:
        assert isinstance(searcher, AdaptiveASHASearcherConfig)  # HalvingSearch's check
        if searcher.bracket_rungs:
            return sorted(searcher.bracket_rungs, reverse=True)
        # No more rungs than make the bottom rung at least one unit, and than max_trials can
        # fill (Determined caps max_rungs the same way).
        log = math.log(searcher.divisor)
        max_rungs = min(
            searcher.max_rungs,
            int(math.log(searcher.top_length) / log) + 1,
            int(math.log(searcher.max_trials) / log) + 1,
        )
        return bracket_rungs(max(max_rungs, 1), searcher.mode)

    def concurrency(self, searcher: HalvingConfig, trials: list[int]) -> list[int]:
        return bracket_max_concurrent(searcher.max_concurrent_trials, searcher.divisor, trials)
