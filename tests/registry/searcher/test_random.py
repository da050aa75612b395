"""``random`` driven with events: sampling within the space and by the seed, concurrency,
``max_trials`` with early exits, progress, a JSON round trip of its state at every event, and
trials without ``max_length``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from headway.expconf import ExperimentConfig
from registry.searcher import SearchMethod, build_searcher
from tests.registry.searcher.helpers import (
    assert_round_trips_change_nothing,
    config,
    drive,
    end_every_trial_on_exit,
    out_of_order,
    searcher_without_max_length,
)


def test_random_respects_types_bounds_and_the_seed() -> None:
    cfg = config("random", max_trials=200, max_concurrent_trials=0)
    creates = drive(cfg, seed=3)["creates"]
    assert isinstance(creates, list) and len(creates) == 200
    for create in creates:
        hp = create.hparams
        assert hp["global_batch_size"] == 32 and hp["optimizer"]["name"] == "sgd"
        assert isinstance(hp["hidden"], int) and 16 <= hp["hidden"] <= 64
        assert isinstance(hp["dropout"], float) and 0.0 <= hp["dropout"] <= 0.5
        assert 1e-4 <= hp["lr"] <= 1e-1
        assert 0.5 <= hp["optimizer"]["momentum"] <= 0.9
        assert hp["activation"] in ("relu", "tanh")
        assert isinstance(create.seed, int) and 0 <= create.seed < 2**31
    assert {c.hparams["activation"] for c in creates} == {"relu", "tanh"}
    assert len({c.hparams["dropout"] for c in creates}) == 200
    assert len({c.seed for c in creates}) == 200
    assert drive(cfg, seed=3)["creates"] == creates
    other = drive(cfg, seed=4)["creates"]
    assert isinstance(other, list)
    assert [c.hparams for c in other] != [c.hparams for c in creates]
    assert [c.seed for c in other] != [c.seed for c in creates]


@pytest.mark.parametrize(("limit", "initial"), [(2, 2), (1, 1), (0, None), (500, None)])
def test_max_concurrent_trials_is_honoured(limit: int, initial: int | None) -> None:
    result = drive(config("random", max_concurrent_trials=limit, max_trials=7))
    log = result["log"]
    assert isinstance(log, list)
    first_event, first_ops = log[0]
    assert first_event == "initial"
    assert len(first_ops) == (7 if initial is None else initial)
    assert result["max_live"] == (7 if initial is None else initial)
    assert len(result["creates"]) == 7  # type: ignore[arg-type]


def test_the_default_max_concurrent_trials_is_16() -> None:
    cfg = config("random", max_trials=40)
    assert cfg.searcher.max_concurrent_trials == 16  # type: ignore[union-attr]
    assert drive(cfg)["max_live"] == 16


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_max_trials_is_reached_exactly_even_when_trials_exit_early(limit: int) -> None:
    cfg = config("random", max_trials=10, max_concurrent_trials=limit)
    result = drive(cfg, exits_early=lambda request_id: int(request_id) % 3 == 0)
    creates = result["creates"]
    assert isinstance(creates, list)
    assert [c.request_id for c in creates] == [str(i) for i in range(1, 11)]
    assert result["shutdowns"] == ["closed 10"]
    searcher = result["searcher"]
    assert isinstance(searcher, SearchMethod)
    assert searcher.progress() == 1.0
    # Events after the end, or about trials that do not exist, change nothing.
    assert searcher.on_trial_closed("4") == []
    assert searcher.on_trial_exited_early("11", "errored") == []
    assert searcher.on_trial_closed("x") == []


def test_progress_is_ended_trials_over_all_trials() -> None:
    result = drive(config("random", max_trials=4, max_concurrent_trials=2))
    # After "initial", each trial is created, validated and closed in turn.
    progress = [p for p in result["progress"] if p is not None]  # type: ignore[union-attr]
    assert progress[0] == 0.0 and progress[-1] == 1.0
    assert sorted(progress) == progress
    assert set(progress) == {0.0, 0.25, 0.5, 0.75, 1.0}


@pytest.mark.parametrize(
    "cfg",
    [
        config("random", max_trials=9, max_concurrent_trials=2),
        config("random", max_trials=5, max_concurrent_trials=0),
    ],
    ids=["random-2", "random-all"],
)
@pytest.mark.parametrize("pick", [lambda live: live[0], out_of_order], ids=["fifo", "lifo"])
def test_a_json_round_trip_at_every_event_changes_no_decision(
    cfg: ExperimentConfig, pick: Callable[[list[str]], str]
) -> None:
    assert_round_trips_change_nothing(cfg, pick)


def test_state_is_plain_json() -> None:
    searcher = build_searcher(config("random", max_trials=3, max_concurrent_trials=1), 5)
    searcher.initial_operations()
    searcher.on_trial_exited_early("1", "user_canceled")
    assert searcher.state_dict() == {"created": 2, "ended": ["1"], "invalid": []}
    fresh = build_searcher(config("random", max_trials=3, max_concurrent_trials=1), 5)
    fresh.load_state_dict({})
    assert fresh.state_dict() == {"created": 0, "ended": [], "invalid": []}


def test_without_max_length_trials_get_no_operation_and_end_on_exit() -> None:
    method = searcher_without_max_length(name="random", max_trials=2, max_concurrent_trials=1)
    assert end_every_trial_on_exit(method) == (2, True)
