"""Shared by the ASHA searcher tests (``async_halving``, ``adaptive_asha``): configs, a
learning curve, and ``Simulation``, which runs a search to its end with trials training in
parallel, optionally with a JSON round trip of the searcher's state at every event."""

from __future__ import annotations

import json
from collections.abc import Callable

from headway.expconf import ExperimentConfig, parse_experiment_config
from registry.searcher import Close, Create, Operation, Shutdown, ValidateAfter, build_searcher

SPACE = {"quality": {"type": "double", "minval": 0.0, "maxval": 1.0}}


def asha(name: str = "async_halving", **searcher: object) -> ExperimentConfig:
    """An ASHA config over ``SPACE``: ``metric: loss``, ``max_length: 16``, ``max_trials: 16``
    unless ``searcher`` says otherwise."""
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
        """The lengths trained in all."""
        return sum(self.trained.values())

    def best_at(self, length: int) -> tuple[str, float]:
        """The request id and value of the best result at ``length``."""
        finals = [(r, v) for r, n, v in self.results if n == length]
        return min(finals, key=lambda item: item[1])


def assert_round_trips_change_nothing(cfg: ExperimentConfig) -> None:
    """A JSON round trip of the searcher's state at every event changes no decision of a search
    in which trial 7 errors once past length 3."""
    from headway.early_exit import EarlyExitReason

    def exits(request_id: str, length: int) -> str | None:
        return EarlyExitReason.ERRORED if request_id == "7" and length > 3 else None

    straight = Simulation(cfg, seed=5, exits=exits).run()
    resumed = Simulation(cfg, seed=5, exits=exits, round_trip=True).run()
    assert resumed.events == straight.events
    assert resumed.shutdown and straight.budget == resumed.budget
