"""The harness loop: train batches, report metrics, validate, checkpoint, watch for preemption.

One ``_Loop`` drives one ``PyTorchTrial`` for one ``Trainer.fit()``. Lengths and periods arrive
already converted to batches. The per-batch path does no reductions, no device syncs and no
I/O: metrics are detached and appended, everything else happens when a period is due. This
module holds training, training-metric reports and checkpoints; ``_Loop`` inherits validation
from ``LoopValidation`` (``_validation.py``).
"""

from __future__ import annotations

import logging
import pathlib
import warnings
from collections.abc import Callable
from typing import Any

from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch._dataloader import ResumableLoader, _PlainLoader
from headway.pytorch._lr_scheduler import LRScheduler, step_after_batch
from headway.pytorch._metrics import combine_slots, detach_metrics, reduce_metrics, run_reducers
from headway.pytorch._trial import PyTorchTrial
from headway.pytorch._units import Batch
from headway.pytorch._validation import LoopValidation

logger = logging.getLogger("headway.pytorch")

DONE, PREEMPTED, STOPPED = "done", "preempted", "stopped"
# What ``_Loop._next_batch`` returns at the end of an epoch (a batch may be anything, None too).
_EPOCH_ENDED = object()


class _Loop(LoopValidation):
    """State and steps of one ``fit()``; see ``headway.pytorch._trainer.Trainer`` for the API."""

    def __init__(
        self,
        trial: PyTorchTrial,
        context: PyTorchTrialContext,
        callbacks: dict[str, PyTorchCallback],
        train_loader: ResumableLoader | _PlainLoader,
        val_loader: ResumableLoader | _PlainLoader,
        *,
        validation_period: Batch | None,
        checkpoint_period: Batch | None,
        reporting_period: Batch,
        checkpoint_policy: str,
        searcher_metric: str | None,
        smaller_is_better: bool,
        test_mode: bool = False,
    ) -> None:
        self.trial = trial
        self.ctx = context
        self.core = context._core
        self.callbacks = list(callbacks.values())
        self.named_callbacks = callbacks
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.validation_period = validation_period
        self.checkpoint_period = checkpoint_period
        self.reporting_period = reporting_period
        self.checkpoint_policy = checkpoint_policy
        self.searcher_metric = searcher_metric
        self.smaller_is_better = smaller_is_better
        self.test_mode = test_mode
        self.pos = context._position
        self.is_chief = context.distributed.rank == 0
        self.size = context.distributed.size
        self.pending: list[dict[str, Any]] = []
        self.last_validation: dict[str, Any] | None = None  # {"steps": n, "metrics": {...}}
        self.best_validation: float | None = None
        self.last_checkpoint_steps: int | None = None
        self.latest_checkpoint: str | None = None
        self.op: Any = None
        self.op_batches_per_unit: float = 1.0
        self._iterator: Any = None
        self._evaluate = self._pick_evaluate()
        self._epoch_outputs_wanted = any(
            _overrides(cb, "on_validation_epoch_end") for cb in self.callbacks
        )
        for cb in self.callbacks:
            if _overrides(cb, "on_checkpoint_end"):
                warnings.warn(
                    f"{type(cb).__name__}.on_checkpoint_end is deprecated (as in Determined); "
                    "override on_checkpoint_write_end instead",
                    FutureWarning,
                    stacklevel=2,
                )

    # -- training ------------------------------------------------------------------------------

    def train_to(self, target: int) -> str:
        """Train until ``target`` batches are done; return DONE, PREEMPTED or STOPPED."""
        pos = self.pos
        ctx = self.ctx
        train_batch = self._batch_trainer()
        to_device = ctx._batch_to_device  # honours experimental.disable_auto_to_device()
        pending = self.pending
        scalers = ctx._scalers
        per_epoch = pos.batches_per_epoch
        agg = ctx._aggregation_frequency
        batch_scheds = [s for s in ctx.lr_schedulers if self._steps_per_batch(s)]
        # With several slots, batches that do not end an aggregation window skip DDP's
        # all-reduce: gradients accumulate locally and are exchanged once per window.
        skip_sync = self.size > 1 and agg > 1
        reporting, validation, checkpoint = (
            self.reporting_period,
            self.validation_period,
            self.checkpoint_period,
        )
        preempt: Callable[..., bool] = self.core.preempt.should_preempt
        # A collective per batch would cost more than the batch on small models; with several
        # slots all ranks check together at reporting boundaries instead.
        check_every_batch = self.size == 1
        while pos.batches_trained < target:
            batch = self._next_batch()
            if batch is _EPOCH_ENDED:
                continue
            batch_idx = pos.batches_trained
            if skip_sync and (batch_idx + 1) % agg:
                with ctx._no_sync():
                    metrics = train_batch(to_device(batch), pos.epoch_idx, batch_idx)
            else:
                metrics = train_batch(to_device(batch), pos.epoch_idx, batch_idx)
            pending.append(detach_metrics(metrics))
            for scaler in scalers:
                if _scaler_needs_update(scaler):
                    scaler.update()
            if batch_scheds:
                step_after_batch(batch_scheds, batch_idx, agg, per_epoch or 0)
            pos.batches_trained += 1
            pos.batch_in_epoch += 1
            n = pos.batches_trained
            if pos.batch_in_epoch == per_epoch:
                self._end_epoch()
            if reporting.is_due(n):
                self.report_training()
                if not check_every_batch and self._should_preempt(preempt):
                    return PREEMPTED
            if validation is not None and validation.is_due(n):
                self.validate()
            if checkpoint is not None and checkpoint.is_due(n):
                self.checkpoint()
            if ctx._stop_requested:
                return STOPPED
            if check_every_batch and preempt(auto_ack=False):
                return PREEMPTED
        return DONE

    def _next_batch(self) -> Any:
        """The next training batch, or ``_EPOCH_ENDED`` once the epoch's loader is exhausted
        (the epoch is then ended: ``train_to`` asks again, from the next epoch)."""
        pos = self.pos
        if self._iterator is None:
            if pos.batch_in_epoch == 0:
                for cb in self.callbacks:
                    cb.on_training_epoch_start(pos.epoch_idx)
            self.train_loader.set_position(pos.epoch_idx, pos.batch_in_epoch)
            self._iterator = iter(self.train_loader)
        try:
            return next(self._iterator)
        except StopIteration:
            if pos.batch_in_epoch == 0:
                raise RuntimeError("the training data loader yielded no batches") from None
            self._end_epoch()
            return _EPOCH_ENDED

    def _batch_trainer(self) -> Callable[..., Any]:
        """What ``train_to`` calls per batch as ``fn(batch, epoch_idx, batch_idx)``."""
        return self.trial.train_batch

    def _should_preempt(self, preempt: Callable[..., bool]) -> bool:
        return bool(preempt(auto_ack=False))

    def _steps_per_batch(self, sched: LRScheduler) -> bool:
        """Whether ``sched`` is stepped after batches (else at epoch ends, or never)."""
        mode = sched.step_mode
        if mode is LRScheduler.StepMode.STEP_EVERY_EPOCH:
            # With aggregation the epoch step follows the optimizer step (Determined); that
            # needs the epoch length, else it falls back to the epoch's real end.
            return self.ctx._aggregation_frequency > 1 and bool(self.pos.batches_per_epoch)
        return mode in (
            LRScheduler.StepMode.STEP_EVERY_BATCH,
            LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP,
        )

    def _end_epoch(self) -> None:
        pos = self.pos
        epoch = pos.epoch_idx
        for sched in self.ctx.lr_schedulers:
            if (
                sched.step_mode is LRScheduler.StepMode.STEP_EVERY_EPOCH
                and not self._steps_per_batch(sched)
                and (epoch + 1) % sched.frequency == 0
            ):
                sched.step()
        for cb in self.callbacks:
            cb.on_training_epoch_end(epoch)
        pos.epoch_idx += 1
        pos.batch_in_epoch = 0
        self._iterator = None

    def report_training(self) -> None:
        """Average and report the pending training metrics at the current step (if any)."""
        if not self.pending:
            return
        # Cleared in place: train_to() holds a reference to this list.
        batches = list(self.pending)
        self.pending.clear()
        metrics = reduce_metrics(batches)
        metrics.update(
            run_reducers(self.ctx._reducers, self.ctx.distributed.allgather, training=True)
        )
        if self.size > 1:
            gathered = self.ctx.distributed.allgather((metrics, float(len(batches))))
            metrics = combine_slots(gathered)
        steps = self.pos.batches_trained
        if self.is_chief:
            self.core.train.report_training_metrics(
                steps_completed=steps, metrics=metrics, epoch=self._epoch_float()
            )
            if self.op is not None:
                self.op.report_progress(steps / self.op_batches_per_unit)
        for cb in self.callbacks:
            cb.on_training_workload_end(metrics, batches)

    def _epoch_float(self) -> float | None:
        per_epoch = self.pos.batches_per_epoch
        return self.pos.batches_trained / per_epoch if per_epoch else None

    # -- checkpoints ---------------------------------------------------------------------------

    def trainer_state(self) -> dict[str, Any]:
        """Counters and positions saved under ``trainer_state`` in ``state-dict.pth``."""
        pos = self.pos
        return {
            "batches_trained": pos.batches_trained,
            "epochs_trained": pos.epoch_idx,
            "dataloader": {"epoch": pos.epoch_idx, "batch_in_epoch": pos.batch_in_epoch},
            "trial_id": self.ctx.get_trial_id(),
            "last_validation": self.last_validation,
            "best_validation": self.best_validation,
        }

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Resume counters, positions and validation history from ``trainer_state``."""
        pos = self.pos
        pos.batches_trained = int(state["batches_trained"])
        loader = state.get("dataloader") or {}
        pos.epoch_idx = int(loader.get("epoch", state.get("epochs_trained", 0)))
        pos.batch_in_epoch = int(loader.get("batch_in_epoch", 0))
        self.last_validation = state.get("last_validation")
        self.best_validation = state.get("best_validation")
        self.last_checkpoint_steps = pos.batches_trained

    def read_state(self, path: pathlib.Path, torch_load_kwargs: dict[str, Any]) -> dict[str, Any]:
        """Read the checkpoint's ``state-dict.pth`` (what ``checkpoint()`` wrote)."""
        return ckpt.load_state(path, self.ctx.device, **torch_load_kwargs)

    def apply_weights(self, state: dict[str, Any], path: pathlib.Path) -> None:
        """Load the trial's models, optimizers, ... and callbacks from a checkpoint."""
        ckpt.apply_weights(state, self.ctx, self.named_callbacks)

    def checkpoint(self) -> str | None:
        """Save a checkpoint at the current step unless one exists; return its storage id."""
        steps = self.pos.batches_trained
        if self.last_checkpoint_steps == steps:
            return self.latest_checkpoint
        self.last_checkpoint_steps = steps
        storage_id = self._store_checkpoint(steps)
        if self.size > 1:
            storage_id = self.ctx.distributed.broadcast(storage_id)
        assert storage_id is not None
        for cb in self.callbacks:
            cb.on_checkpoint_upload_end(storage_id)
        self.latest_checkpoint = storage_id
        return self.latest_checkpoint

    def _store_checkpoint(self, steps: int) -> str | None:
        """Write and register the checkpoint; its storage id on the chief, None elsewhere."""
        storage_id: str | None = None
        if self.is_chief:
            # Hook order and ranks follow Determined's _PyTorchTrialController._save/_checkpoint.
            state = ckpt.build_state(self.ctx, self.named_callbacks, self.trainer_state())
            for cb in self.callbacks:
                cb.on_checkpoint_save_start(state)
            metadata = ckpt.checkpoint_metadata(self.ctx, steps)
            with self.core.checkpoint.store_path(metadata) as (path, sid):
                ckpt.save_state(path, state)
                for cb in self.callbacks:
                    cb.on_checkpoint_save(str(path))
                for cb in self.callbacks:
                    cb.on_checkpoint_end(str(path))
                    cb.on_checkpoint_write_end(str(path))
            storage_id = str(sid)
            logger.info("checkpoint %s saved at %d batches", storage_id, steps)
        return storage_id


def _overrides(callback: PyTorchCallback, hook: str) -> bool:
    return getattr(type(callback), hook) is not getattr(PyTorchCallback, hook)


def _scaler_needs_update(scaler: Any) -> bool:
    # Determined leaves GradScaler.update() to the trial; Headway also calls it, but only when a
    # step was recorded since the last update (a second update() in one batch would raise).
    states = getattr(scaler, "_per_optimizer_states", None)
    if not isinstance(states, dict):
        return True
    return any(state.get("found_inf_per_device") for state in states.values())
