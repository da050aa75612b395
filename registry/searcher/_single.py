"""``single``: one trial trained to ``max_length``, or as long as its script decides when
``max_length`` is not set (Determined's single searcher)."""

from __future__ import annotations

import random
from typing import Any

from headway.expconf import sample_hparams
from registry.searcher._base import (
    Close,
    Create,
    Event,
    Operation,
    SearchMethod,
    Shutdown,
    ValidateAfter,
)


class SingleSearch(SearchMethod):
    """Creates one trial trained to ``max_length``; non-const hyperparameters are sampled once
    from the experiment seed."""

    events = frozenset(
        {
            Event.TRIAL_CREATED,
            Event.VALIDATION_COMPLETED,
            Event.TRIAL_CLOSED,
            Event.TRIAL_EXITED_EARLY,
        }
    )

    def __init__(self, config, seed: int) -> None:
        super().__init__(config, seed)
        self.created = False
        self.closed = False

    def initial_operations(self) -> list[Operation]:
        rng = random.Random(self.seed)
        hparams = sample_hparams(self.config.hyperparameters, rng)
        self.created = True
        return [Create(request_id="1", hparams=hparams, seed=rng.randrange(2**31))]

    def on_trial_created(self, request_id: str) -> list[Operation]:
        max_length = self.config.searcher.max_length
        # Without max_length the trial gets no operation: it ends when its process exits 0.
        return [] if max_length is None else [ValidateAfter(request_id, max_length.value)]

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        return [Close(request_id)]

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        return [Shutdown()]

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        self.closed = True
        return [Shutdown()]

    def state_dict(self) -> dict[str, Any]:
        return {"created": self.created, "closed": self.closed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.created = bool(state.get("created"))
        self.closed = bool(state.get("closed"))
