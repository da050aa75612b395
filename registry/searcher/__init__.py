"""Searchers: event-driven hyperparameter search, pure Python (no Django), as in Determined.

A searcher answers events with operations (``Create``, ``ValidateAfter``, ``Close``,
``Stop``, ``Shutdown``); its state serialises to JSON on the experiment so a restarted server resumes it.
"""

from headway.expconf import ExperimentConfig
from registry.searcher._asha import HalvingSearch
from registry.searcher._base import (
    Close,
    Create,
    Operation,
    SearchMethod,
    Shutdown,
    Stop,
    ValidateAfter,
)
from registry.searcher._grid import GridSearch
from registry.searcher._random import RandomSearch
from registry.searcher._single import SingleSearch

SEARCHERS: dict[str, type[SearchMethod]] = {
    "single": SingleSearch,
    "random": RandomSearch,
    "grid": GridSearch,
    "async_halving": HalvingSearch,
    "adaptive_asha": HalvingSearch,
}


def build_searcher(config: ExperimentConfig, seed: int) -> SearchMethod:
    """Return the search method named by ``config.searcher.name``.

    Raises:
        ValueError: naming the allowed searchers (config validation normally catches this first).
    """
    name = config.searcher.name
    if name not in SEARCHERS:
        raise ValueError(f"searcher.name {name!r} is not supported; allowed: {sorted(SEARCHERS)}")
    return SEARCHERS[name](config, seed)


__all__ = [
    "SEARCHERS",
    "Close",
    "Create",
    "Operation",
    "SearchMethod",
    "Shutdown",
    "Stop",
    "ValidateAfter",
    "build_searcher",
]
