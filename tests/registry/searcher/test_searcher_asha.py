"""ASHA (``async_halving`` and ``adaptive_asha``) driven with a synthetic objective: the paper's
promotion rule on a hand-checked example, brackets as Determined builds them, the budget it
saves on a 64-trial problem, early exits, and a JSON round trip of its state at every event."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable

import pytest

from headway.early_exit import EarlyExitReason
from headway.expconf import ExperimentConfig, parse_experiment_config
from registry.searcher import (
    Close,
    Create,
    Operation,
    SearchMethod,
    Shutdown,
    ValidateAfter,
    build_searcher,
)
from registry.searcher._adaptive_asha import bracket_rungs
from registry.searcher._asha import bracket_max_trials
from registry.searcher._halving import rung_lengths

SPACE = {"quality": {"type": "double", "minval": 0.0, "maxval": 1.0}}


def asha(name: str = "async_halving", **searcher: object) -> ExperimentConfig:
    fields: dict[str, object] = {"metric": "loss", "max_length": 16, "max_trials": 16}
    fields.update(searcher)
    return parse_experiment_config(
        {
            "entrypoint": "python train.py",
            "hyperparameters": SPACE,
            "searcher": {"name": name, **fields},
        }
    )


def loss(hparams: dict[str, float], length: int) -> float:
    """A learning curve: final loss ``1 - quality``, approached as 1/length. Rankings at short
    lengths mostly agree with the final ones (what makes early stopping pay)."""
    return (1.0 - hparams["quality"]) + 0.3 / length


class Simulation:
    """Runs a search to its end with ``slots`` trials training at once. A trial trains toward
    its operation's length; the one with the least remaining work reports first. Each trial
    costs the lengths it trains (resuming from a checkpoint repeats nothing)."""

    def __init__(
        self,
        cfg: ExperimentConfig,
        *,
        seed: int = 0,
        round_trip: bool = False,
        metric: Callable[[dict[str, float], int], float] = loss,
        exits: Callable[[str, int], str | None] = lambda request_id, length: None,
    ) -> None:
        self.cfg, self.seed, self.round_trip = cfg, seed, round_trip
        self.metric, self.exits = metric, exits
        self.searcher = build_searcher(cfg, seed)
        self.hparams: dict[str, dict[str, float]] = {}
        self.target: dict[str, int] = {}  # pending operation lengths
        self.trained: dict[str, int] = {}  # length trained so far
        self.results: list[tuple[str, int, float]] = []
        self.closed: set[str] = set()
        self.events: list[tuple[str, list[Operation]]] = []
        self.shutdown = False
        self.max_running = 0

    def handle(self, event: str, operations: list[Operation]) -> None:
        self.events.append((event, operations))
        for op in operations:
            if isinstance(op, Create):
                self.hparams[op.request_id] = op.hparams
                self.trained[op.request_id] = 0
                self.handle(
                    f"created {op.request_id}", self._call("on_trial_created", op.request_id)
                )
            elif isinstance(op, ValidateAfter):
                assert op.length > self.trained[op.request_id], "an operation must add length"
                self.target[op.request_id] = op.length
            elif isinstance(op, Close):
                self.closed.add(op.request_id)
            elif isinstance(op, Shutdown):
                self.shutdown = True
        self.max_running = max(self.max_running, len(self.target))

    def _call(self, name: str, *args: object) -> list[Operation]:
        operations = getattr(self.searcher, name)(*args)
        if self.round_trip:
            rebuilt = build_searcher(self.cfg, self.seed)
            rebuilt.load_state_dict(json.loads(json.dumps(self.searcher.state_dict())))
            assert rebuilt.state_dict() == self.searcher.state_dict()
            self.searcher = rebuilt
        return operations

    def run(self) -> Simulation:
        self.handle("initial", self._call("initial_operations"))
        while self.target:
            request_id = min(self.target, key=lambda r: (self.target[r] - self.trained[r], int(r)))
            length = self.target.pop(request_id)
            reason = self.exits(request_id, length)
            if reason is not None:
                self.handle(
                    f"exited {request_id}", self._call("on_trial_exited_early", request_id, reason)
                )
                continue
            self.trained[request_id] = length
            value = self.metric(self.hparams[request_id], length)
            self.results.append((request_id, length, value))
            self.handle(
                f"validated {request_id}@{length}",
                self._call("on_validation_completed", request_id, value, length),
            )
            if request_id not in self.target:
                self.handle(f"closed {request_id}", self._call("on_trial_closed", request_id))
        return self

    @property
    def budget(self) -> int:
        return sum(self.trained.values())

    def best_at(self, length: int) -> tuple[str, float]:
        finals = [(r, v) for r, n, v in self.results if n == length]
        return min(finals, key=lambda item: item[1])


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


@pytest.mark.parametrize("name", ["async_halving", "adaptive_asha"])
def test_a_json_round_trip_at_every_event_changes_no_decision(name: str) -> None:
    extra = {"num_rungs": 3} if name == "async_halving" else {"mode": "conservative"}
    cfg = asha(name, max_trials=24, max_length=27, divisor=3, max_concurrent_trials=5, **extra)

    def exits(request_id: str, length: int) -> str | None:
        return EarlyExitReason.ERRORED if request_id == "7" and length > 3 else None

    straight = Simulation(cfg, seed=5, exits=exits).run()
    resumed = Simulation(cfg, seed=5, exits=exits, round_trip=True).run()
    assert resumed.events == straight.events
    assert resumed.shutdown and straight.budget == resumed.budget


def test_hparams_and_seeds_follow_the_experiment_seed() -> None:
    cfg = asha("adaptive_asha", max_trials=20, max_length=16)
    first = Simulation(cfg, seed=1).run()
    again = Simulation(cfg, seed=1).run()
    other = Simulation(cfg, seed=2).run()
    assert first.hparams == again.hparams
    assert first.hparams != other.hparams
    assert all(0.0 <= h["quality"] <= 1.0 for h in first.hparams.values())


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
