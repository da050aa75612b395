"""ASHA brackets side by side, shared by ``async_halving`` (``_async_halving``: one bracket)
and ``adaptive_asha`` (``_adaptive_asha``: several brackets), as Determined.

Trials are split over brackets as Determined's ``adaptive_asha.go`` does: each bracket gets a
similar training budget.
"""

from __future__ import annotations

import abc
from typing import Any

from headway.expconf import (
    AdaptiveASHASearcherConfig,
    AsyncHalvingSearcherConfig,
    ExperimentConfig,
    sample_hparams,
)
from registry.searcher._asha_stopping import StoppingBracket
from registry.searcher._base import Create, Event, Operation, SearchMethod, Shutdown
from registry.searcher._fixed import trial_rng
from registry.searcher._halving import Bracket


def bracket_max_trials(max_trials: int, divisor: float, rungs: list[int]) -> list[int]:
    """Split ``max_trials`` so each bracket gets a similar training budget (a bracket of ``r``
    rungs costs about ``r`` top-rung trainings per ``divisor ** (r - 1)`` trials); at least one
    trial each, the remainder to the first (most aggressive) bracket."""
    weights = [divisor ** (r - 1) / r for r in rungs]
    total = sum(weights)
    trials = [max(int(w / total * max_trials), 1) for w in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    return trials


HalvingConfig = AsyncHalvingSearcherConfig | AdaptiveASHASearcherConfig


class HalvingSearch(SearchMethod):
    """ASHA brackets run side by side (a "tournament"): request ids are global (``"1"``,
    ``"2"``, ...), each belongs to one bracket, and every event goes to its bracket. Trial ``i``
    samples its hparams and seed from ``trial_rng(experiment seed, i)``, as ``random`` does.
    ``Shutdown`` once every bracket is done. With ``max_length`` the brackets give operations
    and promote (``Bracket``); with ``time_metric``/``max_time`` they stop losing trials
    (``StoppingBracket``, Determined 0.38). Subclasses (one per searcher name) choose the
    brackets' rung counts and concurrency.
    """

    events = frozenset(
        {
            Event.TRIAL_CREATED,
            Event.VALIDATION_COMPLETED,
            Event.VALIDATION_REPORTED,
            Event.TRIAL_CLOSED,
            Event.TRIAL_EXITED_EARLY,
            Event.PROGRESS,
        }
    )

    def __init__(self, config: ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        if not isinstance(searcher, AsyncHalvingSearcherConfig | AdaptiveASHASearcherConfig):
            raise TypeError(f"{type(self).__name__} cannot run searcher {searcher.name!r}")
        rungs = self.rungs(searcher)
        trials = bracket_max_trials(searcher.max_trials, searcher.divisor, rungs)
        concurrent = self.concurrency(searcher, trials)
        self.created = 0
        self.bracket_of: dict[str, int] = {}
        self.brackets: list[Bracket | StoppingBracket] = []
        for index, num_rungs in enumerate(rungs):
            common = {
                "num_rungs": num_rungs,
                "divisor": searcher.divisor,
                "max_trials": trials[index],
                "max_concurrent": concurrent[index],
                "smaller_is_better": searcher.smaller_is_better,
                "new_trial": self._new_trial_for(index),
            }
            if searcher.max_time is not None:
                self.brackets.append(StoppingBracket(max_time=searcher.max_time, **common))
            else:
                self.brackets.append(
                    Bracket(max_length=searcher.top_length, stop_once=searcher.stop_once, **common)
                )

    @classmethod
    def events_for(cls, config: ExperimentConfig) -> frozenset[Event]:
        # Only the time_metric form ranks validation reports; the max_length form hears of
        # results through its operations (on_validation_completed).
        if getattr(config.searcher, "time_metric", None) is None:
            return cls.events - {Event.VALIDATION_REPORTED}
        return cls.events

    @abc.abstractmethod
    def rungs(self, searcher: HalvingConfig) -> list[int]:
        """Rung counts of the brackets, most rungs (most aggressive) first."""

    @abc.abstractmethod
    def concurrency(self, searcher: HalvingConfig, trials: list[int]) -> list[int]:
        """Trials each bracket starts with (0: the bracket's default), given its trial budget."""

    def _new_trial_for(self, bracket: int):
        def new_trial() -> Create:
            self.created += 1
            request_id = str(self.created)
            self.bracket_of[request_id] = bracket
            rng = trial_rng(self.seed, self.created)
            hparams = sample_hparams(self.config.hyperparameters, rng)
            return Create(request_id=request_id, hparams=hparams, seed=rng.randrange(2**31))

        return new_trial

    def _bracket(self, request_id: str) -> Bracket | StoppingBracket | None:
        index = self.bracket_of.get(request_id)
        return None if index is None else self.brackets[index]

    def _finish(self, operations: list[Operation]) -> list[Operation]:
        if all(bracket.done for bracket in self.brackets):
            operations.append(Shutdown())
        return operations

    def initial_operations(self) -> list[Operation]:
        operations: list[Operation] = []
        for bracket in self.brackets:
            operations.extend(bracket.initial_operations())
        return operations

    def on_trial_created(self, request_id: str) -> list[Operation]:
        bracket = self._bracket(request_id)
        return [] if bracket is None else bracket.on_trial_created(request_id)

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        bracket = self._bracket(request_id)
        if bracket is None:
            return []
        return self._finish(bracket.on_validation_completed(request_id, metric))

    def on_validation_reported(
        self, request_id: str, metric: float, time: float
    ) -> list[Operation]:
        bracket = self._bracket(request_id)
        if not isinstance(bracket, StoppingBracket):
            return []
        return self._finish(bracket.on_validation_reported(request_id, metric, time))

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        bracket = self._bracket(request_id)
        if not isinstance(bracket, StoppingBracket):
            return []
        return self._finish(bracket.on_trial_closed(request_id))

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        bracket = self._bracket(request_id)
        if bracket is None:
            return []
        return self._finish(bracket.on_trial_exited_early(request_id, reason))

    def progress(self) -> float | None:
        total = sum(bracket.max_trials for bracket in self.brackets)
        return sum(b.progress() * b.max_trials for b in self.brackets) / total

    def state_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "bracket_of": self.bracket_of,
            "brackets": [bracket.state_dict() for bracket in self.brackets],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.created = int(state.get("created", 0))
        self.bracket_of = {str(k): int(v) for k, v in state.get("bracket_of", {}).items()}
        for bracket, saved in zip(self.brackets, state.get("brackets", []), strict=False):
            bracket.load_state_dict(saved)
