"""The searcher registry (``registry.searcher.SEARCHERS``): every searcher in the module named
after it, the same names as the SDK's config schema and docs/config.md, and the events each
declares matching the methods it overrides."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from headway.expconf import parse_experiment_config
from headway.expconf._base import UNIONS
from registry.searcher import (
    SEARCHERS,
    Event,
    SearchMethod,
    build_searcher,
    searcher_class,
    searcher_wants,
)
from tests.registry.searcher.helpers import config

DOCS = Path(__file__).resolve().parents[3] / "docs" / "config.md"
METHOD = {
    Event.TRIAL_CREATED: "on_trial_created",
    Event.VALIDATION_COMPLETED: "on_validation_completed",
    Event.VALIDATION_REPORTED: "on_validation_reported",
    Event.TRIAL_CLOSED: "on_trial_closed",
    Event.TRIAL_EXITED_EARLY: "on_trial_exited_early",
    Event.PROGRESS: "progress",
}


def test_both_searchers_are_registered() -> None:
    assert {"single", "random", "grid"} <= set(SEARCHERS)
    assert type(build_searcher(config("random", max_trials=2), 0)).__name__ == "RandomSearch"
    assert type(build_searcher(config("grid"), 0)).__name__ == "GridSearch"


@pytest.mark.parametrize("name", list(SEARCHERS))
def test_each_searcher_lives_in_the_module_named_after_it(name: str) -> None:
    cls = SEARCHERS[name]
    assert cls.__module__ == f"registry.searcher._{name}"
    assert (Path(__file__).parent / f"test_{name}.py").is_file()


def test_the_config_schema_allows_exactly_the_registered_searchers() -> None:
    # headway.expconf cannot import the registry: its union of searcher configs is the second
    # list, kept equal here (same names, same order: the "allowed" list of its errors).
    assert UNIONS["searcher"].public == tuple(SEARCHERS)


def test_docs_name_exactly_the_registered_searchers() -> None:
    text = DOCS.read_text()
    listed = re.search(r"`name` picks the search method: (.*?)\n\(other names", text, re.S)
    assert listed is not None
    assert re.findall(r"`(\w+)`", listed.group(1)) == list(SEARCHERS)
    assert f"allowed: {', '.join(SEARCHERS)}" in text
    for name in SEARCHERS:  # each has its paragraph in the list of search methods
        assert re.search(rf"^- `{name}`: ", text, re.M), name


@pytest.mark.parametrize("name", list(SEARCHERS))
def test_declared_events_are_the_methods_a_searcher_overrides(name: str) -> None:
    cls = SEARCHERS[name]
    overridden = {
        event
        for event, method in METHOD.items()
        if getattr(cls, method) is not getattr(SearchMethod, method)
    }
    assert cls.events == overridden


def test_asha_asks_for_validation_reports_only_in_the_time_metric_form() -> None:
    def asha(**fields: object):
        searcher = {"name": "adaptive_asha", "metric": "loss", "max_trials": 4, **fields}
        return parse_experiment_config({"entrypoint": "python train.py", "searcher": searcher})

    timed = asha(time_metric="batches", max_time=8)
    lengths = asha(max_length=8)
    assert searcher_wants(timed, Event.VALIDATION_REPORTED)
    assert not searcher_wants(lengths, Event.VALIDATION_REPORTED)
    assert searcher_wants(lengths, Event.VALIDATION_COMPLETED)
    assert build_searcher(timed, 0).wants(Event.VALIDATION_REPORTED)
    assert searcher_class(lengths).events_for(lengths) < searcher_class(lengths).events


def test_an_unknown_name_is_refused_naming_the_allowed_ones() -> None:
    cfg = config("random", max_trials=2)
    object.__setattr__(cfg.searcher, "name", "bayesian")
    with pytest.raises(ValueError, match="'bayesian' is not supported; allowed: "):
        searcher_class(cfg)
