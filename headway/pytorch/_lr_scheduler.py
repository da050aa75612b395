"""``LRScheduler``: how the harness steps a wrapped learning-rate scheduler."""

from __future__ import annotations

import enum
from typing import Any

import torch


class LRScheduler:
    """A torch LR scheduler plus the rule for when the harness steps it.

    Arguments:
        scheduler (torch.optim.lr_scheduler.LRScheduler): any object with ``step()``,
            ``state_dict()`` and ``load_state_dict()``.
        step_mode (LRScheduler.StepMode): when to step (see below).
        frequency (int): step every ``frequency`` batches / epochs / optimizer steps.

    Built by ``PyTorchTrialContext.wrap_lr_scheduler``; mirrors Determined's
    ``determined.pytorch.LRScheduler``.
    """

    class StepMode(enum.Enum):
        """When the harness calls ``scheduler.step()``.

        - ``STEP_EVERY_EPOCH``: after the last batch of every ``frequency``-th epoch.
        - ``STEP_EVERY_BATCH``: after every ``frequency``-th ``train_batch``.
        - ``MANUAL_STEP``: never; you call ``step()`` yourself (state is still checkpointed).
        - ``STEP_EVERY_OPTIMIZER_STEP``: after every ``frequency``-th ``step_optimizer`` of the
          scheduler's optimizer (skipped gradient-aggregation steps do not count).
        """

        STEP_EVERY_EPOCH = 1
        STEP_EVERY_BATCH = 2
        MANUAL_STEP = 3
        STEP_EVERY_OPTIMIZER_STEP = 4

    def __init__(self, scheduler: Any, step_mode: StepMode, frequency: int = 1) -> None:
        if not isinstance(step_mode, LRScheduler.StepMode):
            raise ValueError(f"step_mode must be an LRScheduler.StepMode, got {step_mode!r}")
        if not isinstance(frequency, int) or frequency < 1:
            raise ValueError(f"frequency must be a positive integer, got {frequency!r}")
        self.scheduler = scheduler
        self.step_mode = step_mode
        self.frequency = frequency
        self.optimizer: torch.optim.Optimizer | None = getattr(scheduler, "optimizer", None)
        self._optimizer_steps = 0

    def step(self, *args: Any, **kwargs: Any) -> None:
        """Step the underlying scheduler."""
        self.scheduler.step(*args, **kwargs)

    def get_last_lr(self) -> list[float]:
        """The learning rates the scheduler set last."""
        lrs: list[float] = self.scheduler.get_last_lr()
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The underlying scheduler's state."""
        state: dict[str, Any] = self.scheduler.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the underlying scheduler's state."""
        self.scheduler.load_state_dict(state_dict)

    def _on_optimizer_step(self) -> None:
        self._optimizer_steps += 1
        if self._optimizer_steps % self.frequency == 0:
            self.scheduler.step()
