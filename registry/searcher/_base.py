"""Operations and the ``SearchMethod`` interface (Determined's searcher events).

A searcher answers each event with operations: ``Create`` a trial, ``ValidateAfter`` (train a
trial until an absolute length, then report the searcher metric), ``Close`` a trial (no further
operation will come), ``Stop`` a trial now (time-based ASHA) and ``Shutdown``. The trial learns its length from the registry and reports
back through ``core_context.searcher.operations()``.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
from typing import Any, ClassVar

from headway.expconf import ExperimentConfig


@dataclasses.dataclass(frozen=True)
class Create:
    """Create a trial with these hparams; ``request_id`` names it in later events."""

    request_id: str
    hparams: dict[str, Any]
    seed: int


@dataclasses.dataclass(frozen=True)
class ValidateAfter:
    """Train trial ``request_id`` until ``length`` (absolute, in ``searcher.max_length``'s unit),
    then validate and report the searcher metric (``on_validation_completed``). A later
    ``ValidateAfter`` for a trial that already stopped resumes it from its latest checkpoint."""

    request_id: str
    length: int


@dataclasses.dataclass(frozen=True)
class Close:
    """No further operation will come for trial ``request_id``; a trial still training toward
    an operation is asked to checkpoint and stop (the preemption signal)."""

    request_id: str


@dataclasses.dataclass(frozen=True)
class Stop:
    """Stop trial ``request_id`` now (Determined 0.38's ``searcher.Stop``): it is closed, and a
    run still training is asked to checkpoint and stop (``should_preempt()`` becomes True); its
    exit 0 ends the trial COMPLETED. Used by searchers that do not give operations."""

    request_id: str


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """The search is over."""


Operation = Create | ValidateAfter | Close | Stop | Shutdown


class Event(enum.StrEnum):
    """The events a searcher can ask for, each named after the method the registry calls.

    ``TRIAL_CREATED``: ``on_trial_created``; ``VALIDATION_COMPLETED``:
    ``on_validation_completed`` (a trial finished a ``ValidateAfter``); ``VALIDATION_REPORTED``:
    ``on_validation_reported`` (every validation report, operation or not);
    ``TRIAL_CLOSED``: ``on_trial_closed``; ``TRIAL_EXITED_EARLY``: ``on_trial_exited_early``;
    ``PROGRESS``: ``progress()`` (the experiment's progress is the searcher's).
    """

    TRIAL_CREATED = "trial_created"
    VALIDATION_COMPLETED = "validation_completed"
    VALIDATION_REPORTED = "validation_reported"
    TRIAL_CLOSED = "trial_closed"
    TRIAL_EXITED_EARLY = "trial_exited_early"
    PROGRESS = "progress"


class SearchMethod(abc.ABC):
    """Base of every searcher. Each ``on_*`` event returns the operations it causes.

    A searcher declares the events it wants in ``events`` (``events_for`` when they depend on
    the config); the registry calls it with every event it declares and with no other, so an
    event left out costs nothing (no experiment state is written for it). A test checks that
    the declared events are exactly the methods a searcher overrides.

    Arguments:
        config (ExperimentConfig): the validated experiment config.
        seed (int): the experiment seed; hparam sampling is deterministic given it.
    """

    events: ClassVar[frozenset[Event]] = frozenset()

    def __init__(self, config: ExperimentConfig, seed: int) -> None:
        self.config = config
        self.seed = seed

    @classmethod
    def events_for(cls, config: ExperimentConfig) -> frozenset[Event]:
        """The events this searcher asks for when it runs ``config`` (default: ``events``).

        A classmethod so the registry can ask without building the searcher or loading its
        state (the metrics ingest asks on every batch with validation reports)."""
        return cls.events

    def wants(self, event: Event) -> bool:
        """Whether the registry calls this searcher with ``event``."""
        return event in self.events_for(self.config)

    @abc.abstractmethod
    def initial_operations(self) -> list[Operation]:
        """Operations at experiment start (a ``Create`` per first trial)."""

    def on_trial_created(self, request_id: str) -> list[Operation]:
        """The trial asked for by ``Create(request_id)`` exists and is queued; its first
        ``ValidateAfter`` is expected in the answer."""
        return []

    def on_validation_completed(
        self, request_id: str, metric: float, length: int
    ) -> list[Operation]:
        """The trial completed its operation of ``length`` with searcher ``metric`` (may be NaN)."""
        return []

    def on_validation_reported(
        self, request_id: str, metric: float, time: float
    ) -> list[Operation]:
        """The trial reported validation metrics holding the searcher ``metric`` (may be NaN),
        at ``time``: the value of the config's ``time_metric`` when it has one, else the
        report's ``steps_completed`` (batches). Called for every such report, in step order,
        whether or not the trial has an operation (Determined 0.38's ``validationCompleted``);
        only for searchers that declare ``Event.VALIDATION_REPORTED``."""
        return []

    def on_trial_exited_early(self, request_id: str, reason: str) -> list[Operation]:
        """The trial left the search early; ``reason`` is a
        ``headway.early_exit.EarlyExitReason`` value (``invalid_hp``: searchers that sample
        replace the trial)."""
        return []

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        """The trial's process ended COMPLETED with no operation pending. A later
        ``ValidateAfter`` may still resume it (adaptive searchers promote waiting trials)."""
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
