"""``async_halving`` (one ASHA bracket) and ``adaptive_asha`` (several brackets), as Determined.

Brackets and their trial budgets follow Determined's ``adaptive_asha.go``: ``mode`` picks the
brackets' rung counts, trials are split so each bracket gets a similar training budget, and
``max_concurrent_trials`` is split evenly (more aggressive brackets first).
"""

from __future__ import annotations

import math
from typing import Any

from headway.expconf import (
    AdaptiveASHASearcherConfig,
    AsyncHalvingSearcherConfig,
    ExperimentConfig,
    sample_hparams,
)
from registry.searcher._asha_stopping import StoppingBracket
from registry.searcher._base import Create, Operation, SearchMethod, Shutdown
from registry.searcher._fixed import trial_rng
from registry.searcher._halving import Bracket


def bracket_rungs(max_rungs: int, mode: str) -> list[int]:
    """Rung counts of the brackets of ``mode`` (Determined's adaptive modes), most rungs first.

    >>> bracket_rungs(5, "standard")
    [5, 4, 3]
    """
    if mode == "aggressive":
        rungs = [max_rungs]
    elif mode == "standard":
        rungs = list(range((max_rungs - 1) // 2 + 1, max_rungs + 1))
    elif mode == "conservative":
        rungs = list(range(1, max_rungs + 1))
    else:
        raise ValueError(f"searcher.mode {mode!r}: use aggressive, standard or conservative")
    return sorted(rungs, reverse=True)


def bracket_max_trials(max_trials: int, divisor: float, rungs: list[int]) -> list[int]:
    """Split ``max_trials`` so each bracket gets a similar training budget (a bracket of ``r``
    rungs costs about ``r`` top-rung trainings per ``divisor ** (r - 1)`` trials); at least one
    trial each, the remainder to the first (most aggressive) bracket."""
    weights = [divisor ** (r - 1) / r for r in rungs]
    total = sum(weights)
    trials = [max(int(w / total * max_trials), 1) for w in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    return trials


def bracket_max_concurrent(max_concurrent: int, divisor: float, trials: list[int]) -> list[int]:
    """Split ``max_concurrent_trials`` evenly over brackets, the remainder to the first ones;
    0 (no limit) gives each bracket ``max(trials of the last bracket, divisor)``."""
    count = len(trials)
    if max_concurrent == 0:
        return [max(trials[-1], int(divisor))] * count
    max_concurrent = max(max_concurrent, count)
    share, remainder = divmod(max_concurrent, count)
    return [share + (1 if i < remainder else 0) for i in range(count)]


class HalvingSearch(SearchMethod):
    """ASHA brackets run side by side (a "tournament"): request ids are global (``"1"``,
    ``"2"``, ...), each belongs to one bracket, and every event goes to its bracket. Trial ``i``
    samples its hparams and seed from ``trial_rng(experiment seed, i)``, as ``random`` does.
    ``Shutdown`` once every bracket is done. With ``max_length`` the brackets give operations
    and promote (``Bracket``); with ``time_metric``/``max_time`` they stop losing trials
    (``StoppingBracket``, Determined 0.38).
    """

    def __init__(self, config: ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        if isinstance(searcher, AsyncHalvingSearcherConfig):
            rungs = [searcher.num_rungs]
        elif isinstance(searcher, AdaptiveASHASearcherConfig):
            rungs = self._adaptive_rungs(searcher)
        else:
            raise TypeError(f"{type(self).__name__} cannot run searcher {searcher.name!r}")
        trials = bracket_max_trials(searcher.max_trials, searcher.divisor, rungs)
        if isinstance(searcher, AsyncHalvingSearcherConfig):
            concurrent = [searcher.max_concurrent_trials]  # 0: the bracket's own default
        else:
            concurrent = bracket_max_concurrent(
                searcher.max_concurrent_trials, searcher.divisor, trials
            )
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

    @staticmethod
    def _adaptive_rungs(searcher: AdaptiveASHASearcherConfig) -> list[int]:
        if searcher.bracket_rungs:
            return sorted(searcher.bracket_rungs, reverse=True)
        # No more rungs than make the bottom rung at least one unit, and than max_trials can
        # fill (Determined caps max_rungs the same way).
        log = math.log(searcher.divisor)
        max_rungs = min(
            searcher.max_rungs,
            int(math.log(searcher.top_length) / log) + 1,
            int(math.log(searcher.max_trials) / log) + 1,
        )
        return bracket_rungs(max(max_rungs, 1), searcher.mode)

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
