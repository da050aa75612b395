"""Operations and the ``SearchMethod`` interface (Determined's searcher events).

Today a trial trains to the config's ``searcher.max_length`` and closes itself, so the only
operations are ``Create`` and ``Shutdown``; ``ValidateAfter`` / ``Close`` arrive with the searchers
that stop or extend trials (docs/decisions.md).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

from headway.expconf import ExperimentConfig


@dataclasses.dataclass(frozen=True)
class Create:
    """Create a trial with these hparams; ``request_id`` names it in later events."""

    request_id: str
    hparams: dict[str, Any]
    seed: int


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """The search is over."""


Operation = Create | Shutdown


class SearchMethod(abc.ABC):
    """Base of every searcher. Each ``on_*`` event returns the operations it causes.

    Arguments:
        config (ExperimentConfig): the validated experiment config.
        seed (int): the experiment seed; hparam sampling is deterministic given it.
    """

    def __init__(self, config: ExperimentConfig, seed: int) -> None:
        self.config = config
        self.seed = seed

    @abc.abstractmethod
    def initial_operations(self) -> list[Operation]:
        """Operations at experiment start (a ``Create`` per first trial)."""

    def on_trial_created(self, request_id: str) -> list[Operation]:
        """The trial asked for by ``Create(request_id)`` exists and is queued."""
        return []

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        """The trial completed its operation of ``length`` with searcher ``metric`` (may be NaN)."""
        return []

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        """The trial ended before the searcher was done with it (``reason``: ``errored`` or
        ``user_canceled``)."""
        return []

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        """The trial ended COMPLETED."""
        return []

    def progress(self) -> float | None:
        """Search progress in [0, 1], or None to let the registry average trial progress."""
        return None

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state saved on the experiment."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from ``state_dict()``."""
