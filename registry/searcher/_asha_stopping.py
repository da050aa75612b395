"""One bracket of ASHA that stops losing trials (Determined 0.38's ``time_metric`` form).

Determined 0.38 (``master/pkg/searcher/asha_stopping.go``) no longer tells trials how long to
train: each trial trains as its script decides and reports the searcher metric together with a
"time" metric (``searcher.time_metric``, e.g. ``batches``) in its validation metrics. Rung ``k``
needs ``max_time / divisor ** (num_rungs - 1 - k)`` time units (at least 1). When a validation
report reaches a rung, the trial's metric joins that rung; if it is not among the best
``max(floor(n / divisor), 1)`` of the rung's ``n`` results, the trial is stopped (``Stop``:
preempted, then COMPLETED); a trial that reaches the top rung is stopped too (it trained
``max_time``). A trial may pass several rungs in one report. Rungs never promote a stopped
trial again (stop-based, as in Determined).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any

from headway.early_exit import EarlyExitReason
from registry.searcher._base import Create, Operation, Stop
from registry.searcher._halving import WORST_METRIC, rung_lengths


class StoppingBracket:
    """One stop-based ASHA bracket. Events return operations; ``new_trial()`` (given by the
    owner) makes the ``Create`` of a new trial.

    Arguments:
        num_rungs (int): rungs of this bracket.
        max_time (int): time units of the top rung (``searcher.max_time``).
        divisor (float): the best ``1 / divisor`` of a rung go on.
        max_trials (int): trials this bracket creates (invalid-hparams trials are replaced).
        max_concurrent (int): trials created at start (0: ``divisor ** (num_rungs - 1)``).
        smaller_is_better (bool): metric direction.
        new_trial (Callable[[], Create]): makes the next trial (a fresh request id).

    A new trial is created (while fewer than ``max_trials`` exist) when one is stopped, as
    Determined does, and also when one ends without being stopped (its script finished before
    the top rung), so that ``max_trials`` trials run in all (Determined would end the search
    with fewer; docs/decisions/sdk.md).

    State: each rung's results sorted best first as ``[metric, request_id]`` (normalised:
    smaller is better), each trial's current rung, the stopped, ended and invalid trials, and
    how many were created.
    """

    def __init__(
        self,
        *,
        num_rungs: int,
        max_time: int,
        divisor: float,
        max_trials: int,
        max_concurrent: int,
        smaller_is_better: bool,
        new_trial: Callable[[], Create],
    ) -> None:
        self.units = rung_lengths(max_time, num_rungs, divisor)
        self.divisor = divisor
        self.max_trials = max_trials
        self.max_concurrent = max_concurrent
        self.sign = 1.0 if smaller_is_better else -1.0
        self.new_trial = new_trial
        self.rungs: list[list[list[Any]]] = [[] for _ in self.units]
        self.trial_rungs: dict[str, int] = {}
        self.stopped: set[str] = set()
        self.ended: set[str] = set()
        self.invalid: set[str] = set()
        self.created = 0

    @property
    def top(self) -> int:
        return len(self.units) - 1

    def initial_operations(self) -> list[Operation]:
        """``max_concurrent`` trials (0: enough to fill the top rung once), at most
        ``max_trials``."""
        if self.max_concurrent > 0:
            count = self.max_concurrent
        else:
            count = max(int(self.divisor**self.top), 1)
        return [self._create() for _ in range(min(count, self.max_trials))]

    def on_trial_created(self, request_id: str) -> list[Operation]:
        return []  # no operation: the trial trains until it is stopped or its script ends

    def on_validation_completed(self, request_id: str, metric: float) -> list[Operation]:
        return []  # operations are never given, so never completed

    def on_validation_reported(
        self, request_id: str, metric: float, time: float
    ) -> list[Operation]:
        """Place the result in every rung ``time`` reaches; stop the trial when it loses one
        or reaches the top rung."""
        if request_id not in self.trial_rungs or request_id in self.stopped | self.ended:
            return []
        value = WORST_METRIC if math.isnan(metric) else min(self.sign * metric, WORST_METRIC)
        for rung in range(self.trial_rungs[request_id], len(self.units)):
            self.trial_rungs[request_id] = rung
            if time < self.units[rung]:
                return []
            index = self._insert(rung, value, request_id)
            keep = max(int(len(self.rungs[rung]) / self.divisor), 1)
            if rung == self.top or index >= keep:
                return self._stop(request_id)
            self.trial_rungs[request_id] = rung + 1
        return []

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        if request_id not in self.trial_rungs or request_id in self.ended:
            return []
        self.ended.add(request_id)
        if reason == EarlyExitReason.INVALID_HP:
            # Its results leave the rungs and a replacement is sampled (Determined).
            self.invalid.add(request_id)
            for results in self.rungs:
                results[:] = [entry for entry in results if entry[1] != request_id]
            return self._create_if_room()
        rung = min(self.trial_rungs[request_id], self.top)
        if not any(entry[1] == request_id for entry in self.rungs[rung]):
            self._insert(rung, WORST_METRIC, request_id)  # ranks below every real result
        return [] if request_id in self.stopped else self._create_if_room()

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        if request_id not in self.trial_rungs or request_id in self.ended:
            return []
        self.ended.add(request_id)
        # A stopped trial's replacement was created when it was stopped.
        return [] if request_id in self.stopped else self._create_if_room()

    def progress(self) -> float:
        """Determined's estimate: rung-0 results over 1.2 × ``max_trials``, then at least the
        share of ended valid trials once every trial reported rung 0."""
        results = len(self.rungs[0])
        estimate = results / (1.2 * self.max_trials)
        if results >= self.max_trials:
            valid_ended = len(self.ended) - len(self.invalid)
            estimate = max(valid_ended / self.max_trials, estimate)
        return min(estimate, 1.0)

    @property
    def done(self) -> bool:
        """Every trial was created and has ended."""
        return self.created - len(self.invalid) >= self.max_trials and len(self.ended) >= (
            self.created
        )

    def _create(self) -> Create:
        create = self.new_trial()
        self.trial_rungs[create.request_id] = 0
        self.created += 1
        return create

    def _create_if_room(self) -> list[Operation]:
        if self.created - len(self.invalid) < self.max_trials:
            return [self._create()]
        return []

    def _stop(self, request_id: str) -> list[Operation]:
        self.stopped.add(request_id)
        return [Stop(request_id), *self._create_if_room()]

    def _insert(self, rung: int, value: float, request_id: str) -> int:
        """Add a result to a rung, keeping it sorted (before equal values, as Determined's
        ``sort.Search``); return its index."""
        results = self.rungs[rung]
        index = bisect.bisect_left([entry[0] for entry in results], value)
        results.insert(index, [value, request_id])
        return index

    def state_dict(self) -> dict[str, Any]:
        return {
            "form": "time",
            "rungs": self.rungs,
            "trial_rungs": self.trial_rungs,
            "stopped": sorted(self.stopped, key=int),
            "ended": sorted(self.ended, key=int),
            "invalid": sorted(self.invalid, key=int),
            "created": self.created,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.rungs = [[list(entry) for entry in results] for results in state["rungs"]]
        self.trial_rungs = dict(state["trial_rungs"])
        self.stopped = set(state["stopped"])
        self.ended = set(state["ended"])
        self.invalid = set(state["invalid"])
        self.created = int(state["created"])
