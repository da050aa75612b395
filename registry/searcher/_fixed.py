"""Shared by ``random`` and ``grid``: a fixed number of trials, at most N unfinished at once."""

from __future__ import annotations

import abc
import random
from typing import Any

from headway.early_exit import EarlyExitReason
from headway.expconf import ExperimentConfig, GridSearcherConfig, RandomSearcherConfig
from registry.searcher._base import (
    Close,
    Create,
    Event,
    Operation,
    SearchMethod,
    Shutdown,
    ValidateAfter,
)


def trial_rng(seed: int, index: int) -> random.Random:
    """The random source of trial ``index`` (1-based) of an experiment with ``seed``.

    Deriving it from ``(seed, index)`` alone makes each trial's hparams and seed independent of
    the order in which earlier trials ended, and the searcher state a pair of counters.
    """
    return random.Random(f"{seed}:{index}")  # a str seed is hashed (SHA-512): stable everywhere


class FixedSearch(SearchMethod):
    """Creates ``total()`` trials with request ids ``"1"``, ``"2"``, ...: up to
    ``max_concurrent_trials`` at start (0: all), then one more each time a trial closes or exits
    early, and ``Shutdown`` once every trial was created and has ended. Each trial gets one
    ``ValidateAfter(max_length)`` and is closed when it reports it; nothing is stopped early.
    Without ``max_length`` a trial gets no operation and ends when its process exits 0
    (Determined 0.38: the script decides how long to train).

    With ``replaces_invalid`` (random), a trial that exits with ``invalid_hp`` does not count:
    one more trial is created in its place, as in Determined.

    State: ``created`` (trials asked for so far), ``ended`` (their request ids that ended) and
    ``invalid`` (those replaced); events about unknown or already ended request ids change
    nothing.
    """

    events = frozenset(
        {
            Event.TRIAL_CREATED,
            Event.VALIDATION_COMPLETED,
            Event.TRIAL_CLOSED,
            Event.TRIAL_EXITED_EARLY,
            Event.PROGRESS,
        }
    )
    replaces_invalid = False

    def __init__(self, config: ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        if not isinstance(searcher, RandomSearcherConfig | GridSearcherConfig):
            raise TypeError(f"{type(self).__name__} cannot run searcher {searcher.name!r}")
        self.max_concurrent = searcher.max_concurrent_trials
        self.max_length = None if searcher.max_length is None else searcher.max_length.value
        self.created = 0
        self.ended: set[str] = set()
        self.invalid: set[str] = set()

    @abc.abstractmethod
    def total(self) -> int:
        """How many trials the search creates in all, not counting replaced ones (at least 1)."""

    @abc.abstractmethod
    def trial_create(self, index: int) -> Create:
        """The ``Create`` for trial ``index`` (1-based); a pure function of config, seed, index."""

    def initial_operations(self) -> list[Operation]:
        return self._fill()

    def on_trial_created(self, request_id: str) -> list[Operation]:
        if request_id in self.ended or not self._is_created(request_id) or not self.max_length:
            return []
        return [ValidateAfter(request_id, self.max_length)]

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        if request_id in self.ended or not self._is_created(request_id):
            return []
        return [Close(request_id)]

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        return self._trial_ended(request_id)

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        # An errored or canceled trial counts towards the total, as in Determined.
        if (
            self.replaces_invalid
            and reason == EarlyExitReason.INVALID_HP
            and self._is_created(request_id)
            and request_id not in self.ended
        ):
            self.invalid.add(request_id)
        return self._trial_ended(request_id)

    def progress(self) -> float | None:
        return (len(self.ended) - len(self.invalid)) / self.total()

    def state_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "ended": sorted(self.ended, key=int),
            "invalid": sorted(self.invalid, key=int),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.created = int(state.get("created", 0))
        self.ended = {str(request_id) for request_id in state.get("ended", [])}
        self.invalid = {str(request_id) for request_id in state.get("invalid", [])}

    def _trial_ended(self, request_id: str) -> list[Operation]:
        if request_id in self.ended or not self._is_created(request_id):
            return []
        self.ended.add(request_id)
        return self._fill()

    def _is_created(self, request_id: str) -> bool:
        return request_id.isdigit() and 1 <= int(request_id) <= self.created

    def _fill(self) -> list[Operation]:
        total = self.total() + len(self.invalid)
        limit = total if self.max_concurrent == 0 else self.max_concurrent
        operations: list[Operation] = []
        while self.created < total and self.created - len(self.ended) < limit:
            self.created += 1
            operations.append(self.trial_create(self.created))
        if self.created == total and len(self.ended) == total:
            operations.append(Shutdown())
        return operations
