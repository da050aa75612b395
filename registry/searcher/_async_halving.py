"""``async_halving``: one bracket of asynchronous successive halving (Li et al., "A System for
Massively Parallel Hyperparameter Tuning", MLSys 2020), as Determined's ``async_halving``."""

from __future__ import annotations

from headway.expconf import AsyncHalvingSearcherConfig
from registry.searcher._asha import HalvingConfig, HalvingSearch


class AsyncHalvingSearch(HalvingSearch):
    """One bracket of ``num_rungs`` rungs, starting ``max_concurrent_trials`` trials (0: the
    bracket's default, ``divisor ** (num_rungs - 1)``)."""

    def rungs(self, searcher: HalvingConfig) -> list[int]:
        assert isinstance(searcher, AsyncHalvingSearcherConfig)  # HalvingSearch's check
        return [searcher.num_rungs]

    def concurrency(self, searcher: HalvingConfig, trials: list[int]) -> list[int]:
        return [searcher.max_concurrent_trials]
