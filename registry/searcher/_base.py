"""Operations and the ``SearchMethod`` interface (Determined's searcher events)."""

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
class ValidateAfter:
    """Train trial ``request_id`` until ``length`` (in the config's max_length unit), then validate."""

    request_id: str
    length: int


@dataclasses.dataclass(frozen=True)
class Close:
    """The trial needs no more training."""

    request_id: str


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """The search is over."""


Operation = Create | ValidateAfter | Close | Shutdown


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
        """Operations at experiment start (usually Create + ValidateAfter per trial)."""

    def on_trial_created(self, request_id: str) -> list[Operation]:
        return []

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        return []

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        return []

    def on_trial_closed(self, request_id: str) -> list[Operation]:
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
