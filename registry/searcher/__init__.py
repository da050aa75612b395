"""Searchers: event-driven hyperparameter search, pure Python (no Django), as in Determined.

A searcher answers events with operations (``Create``, ``ValidateAfter``, ``Close``,
``Stop``, ``Shutdown``); its state serialises to JSON on the experiment so a restarted server
resumes it. It declares the events it wants (``SearchMethod.events``, ``Event``) and the
registry calls it with each of them.

``SEARCHERS`` is the one registry of searchers: config name -> class, each class in the module
named after it (``_grid.py`` for ``grid``). The SDK's config schema (``headway.expconf``) keeps
its own union of searcher configs, since it cannot import the registry; a test checks that the
two name the same searchers, in the same order, and that docs/config.md lists them.
"""

from headway.expconf import ExperimentConfig
from registry.searcher._adaptive_asha import AdaptiveASHASearch
from registry.searcher._async_halving import AsyncHalvingSearch
from registry.searcher._base import (
    Close,
    Create,
    Event,
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
    "async_halving": AsyncHalvingSearch,
    "adaptive_asha": AdaptiveASHASearch,
}


def searcher_class(config: ExperimentConfig) -> type[SearchMethod]:
    """The searcher class named by ``config.searcher.name``.

    Raises:
        ValueError: naming the allowed searchers (config validation normally catches this first).
    """
    name = config.searcher.name
    if name not in SEARCHERS:
        raise ValueError(f"searcher.name {name!r} is not supported; allowed: {sorted(SEARCHERS)}")
    return SEARCHERS[name]


def build_searcher(config: ExperimentConfig, seed: int) -> SearchMethod:
    """Return the search method named by ``config.searcher.name``, with fresh state.

    Raises:
        ValueError: naming the allowed searchers (config validation normally catches this first).
    """
    return searcher_class(config)(config, seed)


def searcher_wants(config: ExperimentConfig, event: Event) -> bool:
    """Whether the searcher of ``config`` asks for ``event`` (without building it)."""
    return event in searcher_class(config).events_for(config)


__all__ = [
    "SEARCHERS",
    "Close",
    "Create",
    "Event",
    "Operation",
    "SearchMethod",
    "Shutdown",
    "Stop",
    "ValidateAfter",
    "build_searcher",
    "searcher_class",
    "searcher_wants",
]
