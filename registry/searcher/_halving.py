"""One bracket of asynchronous successive halving (ASHA).

Li et al., "A System for Massively Parallel Hyperparameter Tuning" (MLSys 2020), Algorithm 2,
with Determined's event-driven bookkeeping (``master/pkg/searcher/asha.go``): rung ``k`` trains
to ``max_length / divisor ** (num_rungs - 1 - k)``; when a rung has ``n`` results, its best
``floor(n / divisor)`` are promoted to the next rung, each as soon as it qualifies.
"""

from __future__ import annotations

import bisect
import math
import sys
from collections.abc import Callable
from typing import Any

from headway.early_exit import EarlyExitReason
from registry.searcher._base import Close, Create, Operation, ValidateAfter

# A trial that exited early (or reported NaN) ranks below every real result (Determined: the
# largest float). Finite, so the state stays plain JSON.
WORST_METRIC = sys.float_info.max


def rung_lengths(max_length: int, num_rungs: int, divisor: float) -> list[int]:
    """Absolute training length of each rung (at least 1 unit), smallest first.

    >>> rung_lengths(64, 4, 4)
    [1, 4, 16, 64]
    """
    return [max(int(max_length / divisor ** (num_rungs - 1 - k)), 1) for k in range(num_rungs)]


class Bracket:
    """One ASHA bracket. Events return operations; ``new_trial()`` (given by the owner) makes the
    ``Create`` of a new trial and is called only while fewer than ``max_trials`` were created.

    Arguments:
        num_rungs (int): rungs of this bracket (1 = plain random search to ``max_length``).
        max_length (int): length of the top rung, in the searcher's unit.
        divisor (float): promotion rate: the best ``1 / divisor`` of each rung moves up.
        max_trials (int): trials this bracket creates (invalid-hparams trials are replaced).
        max_concurrent (int): trials created at start (0: ``divisor ** (num_rungs - 1)``).
        stop_once (bool): promote only a trial that qualifies when it reports, never later.
        smaller_is_better (bool): metric direction.
        new_trial (Callable[[], Create]): makes the next trial (a fresh request id).

    State (``state_dict``): each rung's results sorted best first as ``[metric, request_id,
    promoted]`` (metrics normalised: smaller is better), trials outstanding per rung, each
    trial's current rung and highest reported rung, the trials that exited early, the closed
    ones and how many were created.
    """

    def __init__(
        self,
        *,
        num_rungs: int,
        max_length: int,
        divisor: float,
        max_trials: int,
        max_concurrent: int,
        stop_once: bool,
        smaller_is_better: bool,
        new_trial: Callable[[], Create],
    ) -> None:
        self.lengths = rung_lengths(max_length, num_rungs, divisor)
        self.divisor = divisor
        self.max_trials = max_trials
        self.max_concurrent = max_concurrent
        self.stop_once = stop_once
        self.sign = 1.0 if smaller_is_better else -1.0
        self.new_trial = new_trial
        self.rungs: list[list[list[Any]]] = [[] for _ in self.lengths]
        self.outstanding = [0 for _ in self.lengths]
        self.trial_rungs: dict[str, int] = {}
        self.reported: dict[str, int] = {}
        self.exited: set[str] = set()
        self.closed: set[str] = set()
        self.created = 0

    @property
    def top(self) -> int:
        return len(self.lengths) - 1

    def initial_operations(self) -> list[Operation]:
        """Create the first trials: ``max_concurrent`` of them, or enough to fill the top rung
        once (``divisor ** (num_rungs - 1)``) when it is 0; never more than ``max_trials``."""
        if self.max_concurrent > 0:
            count = self.max_concurrent
        else:
            count = max(int(self.divisor**self.top), 1)
        return [self._create() for _ in range(min(count, self.max_trials))]

    def on_trial_created(self, request_id: str) -> list[Operation]:
        if request_id not in self.trial_rungs or request_id in self.closed:
            return []
        return [ValidateAfter(request_id, self.lengths[self.trial_rungs[request_id]])]

    def on_validation_completed(self, request_id: str, metric: float) -> list[Operation]:
        if not self._outstanding(request_id):
            return []  # unknown, already reported this rung, or left the search
        value = WORST_METRIC if math.isnan(metric) else min(self.sign * metric, WORST_METRIC)
        return self._record(request_id, value)

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        if request_id not in self.trial_rungs or request_id in self.exited:
            return []
        rung = self.trial_rungs[request_id]
        if reason == EarlyExitReason.INVALID_HP and request_id not in self.reported:
            # Never reported anything: drop it and sample a replacement (Determined).
            del self.trial_rungs[request_id]
            self.outstanding[rung] -= 1
            self.created -= 1
            self.closed.add(request_id)
            return self._create_if_room([]) + self._close_out_if_done()
        self.exited.add(request_id)
        self.closed.add(request_id)
        if not self._outstanding(request_id):
            return []  # waiting for a promotion that, if it comes, is resolved as the worst
        return self._record(request_id, WORST_METRIC)

    def progress(self) -> float:
        """Determined's estimate: rung-0 results over 1.2 × ``max_trials`` until every trial
        reported, then at least the share of closed trials."""
        results = len(self.rungs[0])
        estimate = results / (1.2 * self.max_trials)
        if results >= self.max_trials:
            estimate = max(len(self.closed) / self.max_trials, estimate)
        return min(estimate, 1.0)

    @property
    def done(self) -> bool:
        """Every trial was created and reported rung 0, and none is training toward a rung."""
        return len(self.rungs[0]) >= self.max_trials and not any(self.outstanding)

    def _outstanding(self, request_id: str) -> bool:
        rung = self.trial_rungs.get(request_id)
        return rung is not None and self.reported.get(request_id, -1) < rung

    def _create(self) -> Create:
        create = self.new_trial()
        self.trial_rungs[create.request_id] = 0
        self.outstanding[0] += 1
        self.created += 1
        return create

    def _create_if_room(self, operations: list[Operation]) -> list[Operation]:
        if self.created < self.max_trials:
            operations.append(self._create())
        return operations

    def _record(self, request_id: str, value: float) -> list[Operation]:
        rung = self.trial_rungs[request_id]
        self.outstanding[rung] -= 1
        self.reported[request_id] = rung
        operations: list[Operation] = []
        continued = False
        if rung == self.top:
            self._insert(rung, value, request_id)
            if request_id not in self.exited:
                operations.append(Close(request_id))
            self.closed.add(request_id)
        else:
            for promoted in self._promotions(rung, request_id, value):
                self.trial_rungs[promoted] = rung + 1
                self.outstanding[rung + 1] += 1
                if promoted in self.exited:
                    # As if it trained the next rung and got the worst result (Determined).
                    return operations + self._record(promoted, WORST_METRIC)
                operations.append(ValidateAfter(promoted, self.lengths[rung + 1]))
                continued = True
        if not continued:
            self._create_if_room(operations)
        return operations + self._close_out_if_done()

    def _insert(self, rung: int, value: float, request_id: str) -> int:
        """Add an unpromoted result to a rung, keeping it sorted (after equal values); return
        its index."""
        results = self.rungs[rung]
        index = bisect.bisect_right([entry[0] for entry in results], value)
        results.insert(index, [value, request_id, False])
        return index

    def _promotions(self, rung: int, request_id: str, value: float) -> list[str]:
        """Insert a result and return who moves up: the newcomer if it is within the best
        ``floor(n / divisor)``, else the entry that just entered that set (unless stop_once)."""
        results = self.rungs[rung]
        before = int(len(results) / self.divisor)
        after = int((len(results) + 1) / self.divisor)
        index = self._insert(rung, value, request_id)
        if index < after:
            results[index][2] = True
            return [request_id]
        if after != before and not self.stop_once and not results[before][2]:
            results[before][2] = True
            return [results[before][1]]
        return []

    def _close_out_if_done(self) -> list[Operation]:
        """Once every trial reported rung 0, close the unpromoted trials of each rung from the
        bottom up while no trial is still training toward it (none can be promoted any more)."""
        if len(self.rungs[0]) < self.max_trials:
            return []
        operations: list[Operation] = []
        for rung, results in enumerate(self.rungs):
            if self.outstanding[rung] > 0:
                break
            for _, request_id, promoted in results:
                if not promoted and request_id not in self.closed:
                    self.closed.add(request_id)
                    if request_id not in self.exited:
                        operations.append(Close(request_id))
        return operations

    def state_dict(self) -> dict[str, Any]:
        return {
            "rungs": self.rungs,
            "outstanding": self.outstanding,
            "trial_rungs": self.trial_rungs,
            "reported": self.reported,
            "exited": sorted(self.exited, key=int),
            "closed": sorted(self.closed, key=int),
            "created": self.created,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.rungs = [[list(entry) for entry in results] for results in state["rungs"]]
        self.outstanding = list(state["outstanding"])
        self.trial_rungs = dict(state["trial_rungs"])
        self.reported = dict(state["reported"])
        self.exited = set(state["exited"])
        self.closed = set(state["closed"])
        self.created = int(state["created"])
