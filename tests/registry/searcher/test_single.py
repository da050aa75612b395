"""``single``: one trial, trained to ``max_length`` or, without it, until its process exits."""

from __future__ import annotations

from registry.searcher import Close, Create, Shutdown, ValidateAfter, build_searcher
from tests.registry.searcher.helpers import (
    config,
    end_every_trial_on_exit,
    json_round_trip,
    searcher_without_max_length,
)


def test_without_max_length_trials_get_no_operation_and_end_on_exit() -> None:
    method = searcher_without_max_length(name="single")
    assert end_every_trial_on_exit(method) == (1, True)


def test_one_trial_trained_to_max_length_then_the_search_ends() -> None:
    cfg = config("single")
    searcher = build_searcher(cfg, 3)
    (create,) = searcher.initial_operations()
    assert isinstance(create, Create) and create.request_id == "1"
    assert build_searcher(cfg, 3).initial_operations() == [create]  # sampled from the seed
    assert searcher.on_trial_created("1") == [ValidateAfter("1", 10)]
    assert searcher.on_validation_completed("1", 0.3, 10) == [Close("1")]
    searcher = json_round_trip(searcher, cfg, 3)
    assert searcher.on_trial_closed("1") == [Shutdown()]
    assert searcher.state_dict() == {"created": True, "closed": True}


def test_a_trial_that_exits_early_ends_the_search() -> None:
    searcher = build_searcher(config("single"), 3)
    searcher.initial_operations()
    assert searcher.on_trial_exited_early("1", "errored") == [Shutdown()]
