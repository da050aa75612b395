"""``adaptive_asha`` (ASHA brackets side by side): brackets as Determined builds them, the budget
it saves on a 64-trial problem, seeds, a JSON round trip of its state at every event, and the
``time_metric`` / ``max_time`` form (Determined 0.38), which stops losing trials (``Stop``),
replaces them, and survives a JSON round trip."""

from __future__ import annotations

import json

import pytest

from headway.early_exit import EarlyExitReason
from registry.searcher import SearchMethod, Shutdown, Stop
from registry.searcher._adaptive_asha import bracket_rungs
from registry.searcher._asha import bracket_max_trials
from registry.searcher._halving import rung_lengths
from tests.registry.searcher.helpers import created, searcher_without_max_length
from tests.registry.searcher.helpers_asha import (
    Simulation,
    asha,
    assert_round_trips_change_nothing,
    loss,
)


def test_rung_lengths_and_brackets_follow_determined() -> None:
    assert rung_lengths(64, 4, 4) == [1, 4, 16, 64]
    assert rung_lengths(100, 3, 3) == [11, 33, 100]
    assert rung_lengths(2, 4, 4) == [1, 1, 1, 2]  # never below one unit
    assert bracket_rungs(5, "aggressive") == [5]
    assert bracket_rungs(5, "standard") == [5, 4, 3]
    assert bracket_rungs(4, "standard") == [4, 3, 2]
    assert bracket_rungs(3, "conservative") == [3, 2, 1]
    # Equal budget per bracket: weights 4^(r-1)/r = 16/3, 2, 1 for r = 3, 2, 1.
    assert bracket_max_trials(100, 4.0, [3, 2, 1]) == [64, 24, 12]
    assert sum(bracket_max_trials(7, 4.0, [3, 2, 1])) == 7


@pytest.mark.parametrize("mode", ["aggressive", "standard"])
def test_asha_finds_a_near_best_trial_on_a_fraction_of_the_budget(mode: str) -> None:
    """64 trials up to length 64: within 5% of the best of all 64 trained fully (regret over
    the spread of final losses), for at most 40% of the budget of training all of them fully."""
    cfg = asha("adaptive_asha", max_trials=64, max_length=64, mode=mode, max_concurrent_trials=8)
    sim = Simulation(cfg, seed=3).run()
    assert sim.shutdown and not sim.target
    created = list(sim.hparams)
    assert len(created) == 64
    finals = [loss(sim.hparams[r], 64) for r in created]
    best, worst = min(finals), max(finals)
    _, found = sim.best_at(64)
    assert (found - best) / (worst - best) <= 0.05  # regret, as a share of the spread
    assert sim.budget <= 0.4 * 64 * 64
    assert sim.max_running <= 8
    stopped_early = [r for r in created if sim.trained[r] < 64]
    assert len(stopped_early) > 32
    assert sim.closed == set(created)


def test_a_json_round_trip_at_every_event_changes_no_decision() -> None:
    cfg = asha(
        "adaptive_asha",
        max_trials=24,
        max_length=27,
        divisor=3,
        max_concurrent_trials=5,
        mode="conservative",
    )
    assert_round_trips_change_nothing(cfg)


def test_hparams_and_seeds_follow_the_experiment_seed() -> None:
    cfg = asha("adaptive_asha", max_trials=20, max_length=16)
    first = Simulation(cfg, seed=1).run()
    again = Simulation(cfg, seed=1).run()
    other = Simulation(cfg, seed=2).run()
    assert first.hparams == again.hparams
    assert first.hparams != other.hparams
    assert all(0.0 <= h["quality"] <= 1.0 for h in first.hparams.values())


# --- the time_metric form -----------------------------------------------------------------------


def roundtrip(method: SearchMethod, **searcher: object) -> SearchMethod:
    fresh = searcher_without_max_length(**searcher)
    fresh.load_state_dict(json.loads(json.dumps(method.state_dict())))
    return fresh


TIME_ASHA = {
    "name": "adaptive_asha",
    "time_metric": "batches",
    "max_time": 16,
    "max_trials": 4,
    "max_rungs": 3,
    "divisor": 2,
    "mode": "aggressive",
    "max_concurrent_trials": 2,
}


def test_time_asha_stops_a_loser_and_replaces_it() -> None:
    method = searcher_without_max_length(**TIME_ASHA)
    first, second = created(method.initial_operations())
    for request_id in (first, second):
        assert method.on_trial_created(request_id) == []
    # Below the first rung (4 batches): nothing to decide yet.
    assert method.on_validation_reported(first, 0.5, 2) == []
    # Rungs at 4, 8, 16. The first result of a rung goes on.
    assert method.on_validation_reported(first, 0.5, 4) == []
    method = roundtrip(method, **TIME_ASHA)
    # A worse second result at rung 0 is stopped, and a new trial takes its place.
    ops = method.on_validation_reported(second, 0.9, 4)
    assert ops[0] == Stop(second) and len(created(ops)) == 1
    # Reports after the stop change nothing.
    assert method.on_validation_reported(second, 0.1, 8) == []
    # One report may pass several rungs: the first trial reaches the top (16) and is stopped.
    ops = method.on_validation_reported(first, 0.4, 16)
    assert ops[0] == Stop(first) and len(created(ops)) == 1


def test_time_asha_larger_is_better_and_nan_ranks_last() -> None:
    method = searcher_without_max_length(**{**TIME_ASHA, "smaller_is_better": False})
    first, second = created(method.initial_operations())
    assert method.on_validation_reported(first, float("nan"), 4) == []
    # 0.2 is better than NaN: it goes on, NaN stays below it.
    assert method.on_validation_reported(second, 0.2, 4) == []


def test_time_asha_ends_after_max_trials_have_ended() -> None:
    method = searcher_without_max_length(**TIME_ASHA)
    pending = created(method.initial_operations())
    ended: list[str] = []
    shutdown = False
    while pending:
        request_id = pending.pop(0)
        ops = method.on_validation_reported(request_id, float(len(ended)), 4)
        pending += created(ops)
        if any(isinstance(op, Stop) for op in ops):
            ops = method.on_trial_closed(request_id)  # the stopped trial exits 0
        else:
            ops = method.on_trial_closed(request_id)  # its script ended before the top rung
        ended.append(request_id)
        pending += created(ops)
        shutdown = shutdown or any(isinstance(op, Shutdown) for op in ops)
        method = roundtrip(method, **TIME_ASHA)
    assert len(ended) == 4 and shutdown
    assert method.progress() == 1.0


def test_time_asha_replaces_an_invalid_trial_without_counting_it() -> None:
    method = searcher_without_max_length(**{**TIME_ASHA, "max_trials": 2})
    first, second = created(method.initial_operations())
    ops = method.on_trial_exited_early(first, EarlyExitReason.INVALID_HP)
    (replacement,) = created(ops)
    assert replacement not in (first, second)
    # An errored trial counts: no replacement once max_trials valid trials exist.
    assert created(method.on_trial_exited_early(second, EarlyExitReason.ERRORED)) == []
