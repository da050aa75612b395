"""``async_halving`` (one ASHA bracket) driven with a synthetic objective: the paper's promotion
rule on a hand-checked example, ``stop_once``, concurrency, metric direction and NaN, early
exits, invalid hyperparameters, a JSON round trip of its state at every event, progress."""

from __future__ import annotations

import json
import math
import random

import pytest

from headway.early_exit import EarlyExitReason
from registry.searcher import (
    Close,
    Create,
    Operation,
    SearchMethod,
    Shutdown,
    ValidateAfter,
    build_searcher,
)
from tests.registry.searcher.helpers_asha import (
    Simulation,
    asha,
    assert_round_trips_change_nothing,
    loss,
)


def test_promotions_follow_the_papers_rule_on_a_hand_checked_example() -> None:
    """One bracket, rungs at 1, 4, 16, divisor 2, one trial at a time: after n results in a
    rung, its best floor(n/2) have been promoted, each as soon as it qualified."""
    quality = {"1": 0.5, "2": 0.9, "3": 0.1, "4": 0.7}

    cfg = asha(num_rungs=3, divisor=2, max_trials=4, max_concurrent_trials=1)
    searcher = build_searcher(cfg, 0)
    assert [b.lengths for b in searcher.brackets] == [[4, 8, 16]]  # 16/4, 16/2, 16
    (create,) = searcher.initial_operations()
    assert create.request_id == "1"
    assert searcher.on_trial_created("1") == [ValidateAfter("1", 4)]

    def report(request_id: str, length: int) -> list[Operation]:
        return searcher.on_validation_completed(request_id, 1 - quality[request_id], length)

    def created(operations: list[Operation]) -> str:
        (op,) = [op for op in operations if isinstance(op, Create)]
        assert searcher.on_trial_created(op.request_id) == [ValidateAfter(op.request_id, 4)]
        return op.request_id

    # Rung 0 has 1 result: floor(1/2) = 0 promotions, so a new trial starts.
    assert created(report("1", 4)) == "2"
    # 2 results: floor(2/2) = 1; trial 2 (0.9) is the best and moves up at once.
    assert report("2", 4) == [ValidateAfter("2", 8)]
    # Rung 1 has 1 result: nothing to promote; trial 3 starts.
    assert created(report("2", 8)) == "3"
    # Rung 0: 3 results, floor(3/2) = 1 already promoted; trial 3 (0.1) is the worst.
    assert created(report("3", 4)) == "4"
    # Rung 0: 4 results, floor(4/2) = 2. Trial 4 (0.7) is second best: promoted now.
    # Every trial reported rung 0 and nothing trains toward it: trials 1 and 3 are closed.
    assert report("4", 4) == [ValidateAfter("4", 8), Close("1"), Close("3")]
    # Rung 1: 2 results, floor(2/2) = 1: trial 2 (the better one, waiting since it reported)
    # is promoted even though trial 4 just reported; trial 4 waits, then is closed out.
    assert report("4", 8) == [ValidateAfter("2", 16), Close("4")]
    assert report("2", 16) == [Close("2"), Shutdown()]
    assert searcher.progress() == 1.0


def test_stop_once_never_promotes_a_waiting_trial() -> None:
    quality = {"1": 0.5, "2": 0.4}
    cfg = asha(num_rungs=2, divisor=2, max_trials=2, max_concurrent_trials=1, stop_once=True)
    searcher = build_searcher(cfg, 0)
    searcher.initial_operations()
    searcher.on_trial_created("1")
    ops = searcher.on_validation_completed("1", 1 - quality["1"], 8)
    (create,) = ops
    assert isinstance(create, Create) and create.request_id == "2"
    searcher.on_trial_created("2")
    # floor(2/2) = 1 promotion is due, and trial 1 is the best, but it stopped already.
    assert searcher.on_validation_completed("2", 1 - quality["2"], 8) == [
        Close("1"),
        Close("2"),
        Shutdown(),
    ]


def test_the_default_concurrency_fills_the_top_rung_once() -> None:
    cfg = asha(num_rungs=3, max_trials=100, max_length=64, max_concurrent_trials=0)
    assert len(build_searcher(cfg, 0).initial_operations()) == 16  # 4 ** (3 - 1)


def test_larger_is_better_and_nan_metrics() -> None:
    def accuracy(hparams: dict[str, float], length: int) -> float:
        if hparams["quality"] > 0.95:
            return math.nan  # diverged: ranks last
        return 1 - loss(hparams, length)

    cfg = asha(num_rungs=3, max_trials=32, max_length=16, smaller_is_better=False)
    sim = Simulation(cfg, metric=accuracy).run()
    finite = {r: 1 - loss(h, 16) for r, h in sim.hparams.items() if h["quality"] <= 0.95}
    finalists = {r for r, n, _ in sim.results if n == 16}
    assert finalists and all(not math.isnan(v) for r, n, v in sim.results if n == 16)
    assert max(finite, key=lambda r: finite[r]) in finalists


@pytest.mark.parametrize("reason", [EarlyExitReason.ERRORED, EarlyExitReason.USER_CANCELED])
def test_a_trial_that_exits_early_ranks_last_and_the_search_finishes(reason: str) -> None:
    cfg = asha(num_rungs=3, max_trials=16, max_length=16, max_concurrent_trials=4)
    sim = Simulation(cfg, exits=lambda r, n: reason if int(r) % 5 == 0 and n > 1 else None).run()
    assert sim.shutdown and len(sim.hparams) == 16
    assert all(int(r) % 5 != 0 for r, n, _ in sim.results if n > 1)


def test_invalid_hparams_are_replaced_by_new_samples() -> None:
    def invalid(request_id: str, length: int) -> str | None:
        return EarlyExitReason.INVALID_HP if request_id in {"2", "3"} else None

    cfg = asha(num_rungs=2, max_trials=8, max_length=16, max_concurrent_trials=2)
    sim = Simulation(cfg, exits=invalid).run()
    assert sim.shutdown
    assert len(sim.hparams) == 10  # 8 + the 2 replacements
    assert {r for r, n, _ in sim.results if n == 4} == set(sim.hparams) - {"2", "3"}


def test_a_json_round_trip_at_every_event_changes_no_decision() -> None:
    cfg = asha(
        "async_halving",
        max_trials=24,
        max_length=27,
        divisor=3,
        max_concurrent_trials=5,
        num_rungs=3,
    )
    assert_round_trips_change_nothing(cfg)


def test_events_about_unknown_or_finished_trials_change_nothing() -> None:
    searcher: SearchMethod = build_searcher(asha(num_rungs=2, max_trials=2), 0)
    searcher.initial_operations()
    before = json.dumps(searcher.state_dict())
    assert searcher.on_validation_completed("99", 0.1, 4) == []
    assert searcher.on_trial_exited_early("99", EarlyExitReason.ERRORED) == []
    assert searcher.on_trial_created("99") == []
    assert json.dumps(searcher.state_dict()) == before
    searcher.on_trial_created("1")
    searcher.on_validation_completed("1", 0.1, 4)
    after = json.dumps(searcher.state_dict())
    assert searcher.on_validation_completed("1", 0.1, 4) == []  # a retried report
    assert json.dumps(searcher.state_dict()) == after


def test_progress_grows_to_one() -> None:
    sim = Simulation(asha(num_rungs=3, max_trials=16, max_length=16, max_concurrent_trials=3))
    values = []
    original = sim.handle

    def tracking(event: str, operations: list[Operation]) -> None:
        original(event, operations)
        values.append(sim.searcher.progress())

    sim.handle = tracking  # type: ignore[method-assign]
    sim.run()
    assert values[0] == 0.0 and values[-1] == 1.0
    assert all(0.0 <= v <= 1.0 for v in values)


def test_random_is_unused_here() -> None:
    # The searcher's sampling comes only from the experiment seed, never global state.
    random.seed(1)
    a = build_searcher(asha(num_rungs=2, max_trials=3), 4).initial_operations()
    random.seed(2)
    b = build_searcher(asha(num_rungs=2, max_trials=3), 4).initial_operations()
    assert a == b
