"""The harness loop: train batches, report metrics, validate, checkpoint, watch for preemption.

One ``_Loop`` drives one ``PyTorchTrial`` for one ``Trainer.fit()``. Lengths and periods arrive
already converted to batches. The per-batch path does no reductions, no device syncs and no
I/O: metrics are detached and appended, everything else happens when a period is due.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable
from typing import Any

import torch

from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch._dataloader import ResumableLoader, _PlainLoader
from headway.pytorch._lr_scheduler import LRScheduler
from headway.pytorch._metrics import combine_slots, detach_metrics, reduce_metrics
from headway.pytorch._trial import PyTorchTrial
from headway.pytorch._units import Batch

logger = logging.getLogger("headway.pytorch")

DONE, PREEMPTED, STOPPED = "done", "preempted", "stopped"


class _Loop:
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

    # -- training ------------------------------------------------------------------------------

    def train_to(self, target: int) -> str:
        """Train until ``target`` batches are done; return DONE, PREEMPTED or STOPPED."""
        pos = self.pos
        ctx = self.ctx
        train_batch = self.trial.train_batch
        to_device = ctx.to_device
        pending = self.pending
        scalers = ctx._scalers
        batch_scheds = [
            s for s in ctx.lr_schedulers if s.step_mode is LRScheduler.StepMode.STEP_EVERY_BATCH
        ]
        per_epoch = pos.batches_per_epoch
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
            if self._iterator is None:
                if pos.batch_in_epoch == 0:
                    for cb in self.callbacks:
                        cb.on_training_epoch_start(pos.epoch_idx)
                self.train_loader.set_position(pos.epoch_idx, pos.batch_in_epoch)
                self._iterator = iter(self.train_loader)
            try:
                batch = next(self._iterator)
            except StopIteration:
                if pos.batch_in_epoch == 0:
                    raise RuntimeError("the training data loader yielded no batches") from None
                self._end_epoch()
                continue
            metrics = train_batch(to_device(batch), pos.epoch_idx, pos.batches_trained)
            pending.append(detach_metrics(metrics))
            for scaler in scalers:
                scaler.update()
            pos.batches_trained += 1
            pos.batch_in_epoch += 1
            n = pos.batches_trained
            for sched in batch_scheds:
                if n % sched.frequency == 0:
                    sched.step()
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

    def _should_preempt(self, preempt: Callable[..., bool]) -> bool:
        return bool(preempt(auto_ack=False))

    def _end_epoch(self) -> None:
        pos = self.pos
        epoch = pos.epoch_idx
        for sched in self.ctx.lr_schedulers:
            if (
                sched.step_mode is LRScheduler.StepMode.STEP_EVERY_EPOCH
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
        metrics.update(self._custom_reducers(training=True))
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

    def _custom_reducers(self, *, training: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for reducer, name, for_training, for_validation in self.ctx._reducers:
            if not (for_training if training else for_validation):
                continue
            per_slot = self.ctx.distributed.allgather(reducer.per_slot_reduce())
            value = reducer.cross_slot_reduce(per_slot)
            reducer.reset()
            if name is None:
                if not isinstance(value, dict):
                    raise TypeError(
                        f"{type(reducer).__name__} was wrapped without a name, so "
                        "cross_slot_reduce() must return a dict of metrics"
                    )
                out.update(value)
            else:
                out[name] = value
        return out

    # -- validation ----------------------------------------------------------------------------

    def _pick_evaluate(self) -> Callable[[], dict[str, Any]]:
        cls = type(self.trial)
        if cls.evaluate_batch is not PyTorchTrial.evaluate_batch:
            params = inspect.signature(self.trial.evaluate_batch).parameters
            self._eval_takes_idx = len(params) >= 2
            return self._evaluate_batches
        if cls.evaluate_full_dataset is not PyTorchTrial.evaluate_full_dataset:
            return self._evaluate_full
        raise TypeError(
            f"{cls.__name__} must implement evaluate_batch() or evaluate_full_dataset()"
        )

    def _evaluate_batches(self) -> dict[str, Any]:
        outputs: list[dict[str, Any]] = []
        weights: list[float] = []
        evaluate = self.trial.evaluate_batch
        self.val_loader.set_position(0, 0)
        for idx, batch in enumerate(self.val_loader):
            batch = self.ctx.to_device(batch)
            out = evaluate(batch, idx) if self._eval_takes_idx else evaluate(batch)  # type: ignore[call-arg]
            if not isinstance(out, dict):
                raise TypeError(f"evaluate_batch must return a dict, got {type(out).__name__}")
            outputs.append(out)
            weights.append(float(self.trial.get_batch_length(batch)))
        reducers = self.trial.evaluation_reducer()
        metrics = reduce_metrics(outputs, weights, reducers) if outputs else {}
        if self.size > 1:
            metrics = combine_slots(
                [m for m in self.ctx.distributed.allgather((metrics, sum(weights))) if m[1] > 0],
                reducers,
            )
        return metrics

    def _evaluate_full(self) -> dict[str, Any]:
        # Determined runs evaluate_full_dataset on the chief only; other ranks get its answer.
        metrics: dict[str, Any] = {}
        if self.is_chief:
            self.val_loader.set_position(0, 0)
            metrics = self.trial.evaluate_full_dataset(self.val_loader.loader)
            if not isinstance(metrics, dict):
                raise TypeError(
                    f"evaluate_full_dataset must return a dict, got {type(metrics).__name__}"
                )
            metrics = reduce_metrics([metrics])
        if self.size > 1:
            metrics = self.ctx.distributed.broadcast(metrics)
        return metrics

    def validate(self) -> dict[str, Any]:
        """Run validation now, report it at the current step and apply the checkpoint policy.

        Validation runs in eval mode under ``no_grad`` and leaves every RNG as it found it, so
        how often a trial validates never changes how it trains.
        """
        for cb in self.callbacks:
            cb.on_validation_start()
        for reducer, _, _, for_validation in self.ctx._reducers:
            if for_validation:
                reducer.reset()
        modes = [m.training for m in self.ctx.models]
        rng = ckpt.capture_rng_state()
        try:
            for m in self.ctx.models:
                m.eval()
            with torch.no_grad():
                metrics = self._evaluate()
                metrics.update(self._custom_reducers(training=False))
        finally:
            for m, mode in zip(self.ctx.models, modes, strict=True):
                m.train(mode)
            ckpt.restore_rng_state(rng)
        steps = self.pos.batches_trained
        if self.is_chief:
            self.core.train.report_validation_metrics(
                steps_completed=steps, metrics=metrics, epoch=self._epoch_float()
            )
        for cb in self.callbacks:
            cb.on_validation_end(metrics)
        self.last_validation = {"steps": steps, "metrics": metrics}
        improved = self._note_best(metrics)
        if self.checkpoint_policy == "all" or (self.checkpoint_policy == "best" and improved):
            self.checkpoint()
        return metrics

    def searcher_value(self, metrics: dict[str, Any]) -> float | None:
        """The searcher metric's value in ``metrics``; ``KeyError`` names it when absent."""
        if self.searcher_metric is None:
            return None
        if self.searcher_metric not in metrics:
            raise KeyError(
                f"searcher.metric {self.searcher_metric!r} is not among the validation metrics "
                f"{sorted(metrics)}; rename it in the config or in evaluate_batch()"
            )
        return float(metrics[self.searcher_metric])

    def _note_best(self, metrics: dict[str, Any]) -> bool:
        if self.searcher_metric is None or self.searcher_metric not in metrics:
            return False
        value = float(metrics[self.searcher_metric])
        if math.isnan(value):
            return False
        best = self.best_validation
        better = (
            best is None
            or (self.smaller_is_better and value < best)
            or (not self.smaller_is_better and value > best)
        )
        if better:
            self.best_validation = value
        return better

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
            "lr_scheduler_optimizer_steps": [s._optimizer_steps for s in self.ctx.lr_schedulers],
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
        steps = state.get("lr_scheduler_optimizer_steps") or []
        for sched, n in zip(self.ctx.lr_schedulers, steps, strict=False):
            sched._optimizer_steps = int(n)
        self.last_checkpoint_steps = pos.batches_trained

    def checkpoint(self) -> str | None:
        """Save a checkpoint at the current step unless one exists; return its storage id."""
        steps = self.pos.batches_trained
        if self.last_checkpoint_steps == steps:
            return self.latest_checkpoint
        self.last_checkpoint_steps = steps
        if not self.is_chief:
            return None
        state = ckpt.build_state(self.ctx, self.named_callbacks, self.trainer_state())
        metadata = ckpt.checkpoint_metadata(self.ctx, steps)
        with self.core.checkpoint.store_path(metadata) as (path, storage_id):
            ckpt.save_state(path, state)
            for cb in self.callbacks:
                cb.on_checkpoint_save(str(path))
        for cb in self.callbacks:
            cb.on_checkpoint_upload_end(str(storage_id))
        self.latest_checkpoint = str(storage_id)
        logger.info("checkpoint %s saved at %d batches", storage_id, steps)
        return self.latest_checkpoint
