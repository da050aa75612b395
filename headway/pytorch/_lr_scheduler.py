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
        """When the harness calls ``scheduler.step()`` (Determined's rules, 0.38.1).

        With ``optimizations.aggregation_frequency`` n (default 1) the harness only steps
        schedulers after a batch in which the optimizers step (batch ``i`` with
        ``(i + 1) % n == 0``), catching up on what the window's batches would have done.

        - ``STEP_EVERY_EPOCH``: after the last batch of every ``frequency``-th epoch (with
          n > 1: after the optimizer step whose next step falls in the next epoch).
        - ``STEP_EVERY_BATCH``: after every ``frequency``-th batch (batch ``i`` with
          ``(i + 1) % frequency == 0``); with n > 1 the window's steps are made together.
        - ``MANUAL_STEP``: never; you call ``step()`` yourself (state is still checkpointed).
          The only mode allowed for ``ReduceLROnPlateau``.
        - ``STEP_EVERY_OPTIMIZER_STEP``: after an optimizer-stepping batch ``i`` with
          ``(i + 1) % frequency == 0`` (every batch, counted like Determined, whether or not
          ``train_batch`` called ``step_optimizer``).
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


def step_after_batch(
    schedulers: list[LRScheduler], batch_idx: int, aggregation_frequency: int, per_epoch: int
) -> None:
    """Step ``schedulers`` after trial batch ``batch_idx`` (0-based, counted over the trial).

    ``per_epoch`` is the epoch length in batches; ``STEP_EVERY_EPOCH`` schedulers are passed
    here only when ``aggregation_frequency`` > 1 and the length is known (otherwise the loop
    steps them at the epoch's end). Mirrors Determined's
    ``_PyTorchTrialController._auto_step_lr_scheduler_per_batch``.
    """
    agg = aggregation_frequency
    if (batch_idx + 1) % agg:
        return  # no optimizer step in this batch
    for sched in schedulers:
        mode, freq = sched.step_mode, sched.frequency
        if mode is LRScheduler.StepMode.STEP_EVERY_BATCH:
            for i in range(batch_idx - agg + 1, batch_idx + 1):
                if (i + 1) % freq == 0:
                    sched.step()
        elif mode is LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP:
            if (batch_idx + 1) % freq == 0:
                sched.step()
        elif mode is LRScheduler.StepMode.STEP_EVERY_EPOCH:
            # Step when the next optimizer step lands in a later epoch.
            for epoch in range(batch_idx // per_epoch, (batch_idx + agg) // per_epoch):
                if (epoch + 1) % freq == 0:
                    sched.step()
