"""Validation for the harness loop: evaluate, report, track the best searcher metric.

``_Loop`` (``_loop.py``) inherits ``LoopValidation``, which picks ``evaluate_batch`` or
``evaluate_full_dataset``, runs it in eval mode without touching any RNG, reduces the metrics
across slots, reports them and applies the checkpoint policy. Source: Determined 0.38.1
``pytorch/_pytorch_trial.py`` (``_PyTorchTrialController._validate``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._context import PyTorchTrialContext, _Position
from headway.pytorch._dataloader import ResumableLoader, _PlainLoader
from headway.pytorch._metrics import combine_slots, plain_metrics, reduce_metrics, run_reducers
from headway.pytorch._trial import PyTorchTrial


class LoopValidation:
    """Mixin of ``_Loop``: its validation steps and the best-metric bookkeeping."""

    # Set by _Loop.__init__; declared here for the type checker.
    trial: PyTorchTrial
    ctx: PyTorchTrialContext
    core: Any
    callbacks: list[PyTorchCallback]
    val_loader: ResumableLoader | _PlainLoader
    checkpoint_policy: str
    searcher_metric: str | None
    smaller_is_better: bool
    test_mode: bool
    pos: _Position
    is_chief: bool
    size: int
    last_validation: dict[str, Any] | None
    best_validation: float | None
    _evaluate: Callable[[], dict[str, Any]]
    _epoch_outputs_wanted: bool
    _eval_takes_idx: bool

    if TYPE_CHECKING:
        # Defined by _Loop.
        def checkpoint(self) -> str | None: ...
        def _epoch_float(self) -> float | None: ...

    # -- validation ----------------------------------------------------------------------------

    # The class whose evaluate_batch / evaluate_full_dataset mean "not defined".
    _trial_base: Any = PyTorchTrial

    def _pick_evaluate(self) -> Callable[[], dict[str, Any]]:
        cls, base = type(self.trial), self._trial_base
        if (cls.evaluate_batch is not base.evaluate_batch) and (
            cls.evaluate_full_dataset is not base.evaluate_full_dataset
        ):
            raise TypeError(
                f"{cls.__name__} defines both evaluate_batch() and evaluate_full_dataset(); "
                "define exactly one (as Determined requires)"
            )
        if cls.evaluate_batch is not base.evaluate_batch:
            params = inspect.signature(self.trial.evaluate_batch).parameters
            self._eval_takes_idx = len(params) >= 2
            return self._evaluate_batches
        if cls.evaluate_full_dataset is not base.evaluate_full_dataset:
            return self._evaluate_full
        raise TypeError(
            f"{cls.__name__} must implement evaluate_batch() or evaluate_full_dataset()"
        )

    def _evaluate_batches(self) -> dict[str, Any]:
        outputs: list[dict[str, Any]] = []
        weights: list[float] = []
        evaluate = self.trial.evaluate_batch
        for cb in self.callbacks:
            cb.on_validation_epoch_start()
        self.val_loader.set_position(0, 0)
        for idx, batch in enumerate(self.val_loader):
            batch = self.ctx._batch_to_device(batch)
            out = self._evaluate_one(evaluate, batch, idx)
            if not isinstance(out, dict):
                raise TypeError(f"evaluate_batch must return a dict, got {type(out).__name__}")
            outputs.append(out)
            weights.append(self._batch_weight(batch))
            if self.test_mode:
                break  # Determined's test mode validates one batch
        if self._epoch_outputs_wanted:
            numpy_outputs = [_numpy_metrics(out) for out in outputs]
            for cb in self.callbacks:
                cb.on_validation_epoch_end(numpy_outputs)
        reducers = self.trial.evaluation_reducer()
        metrics = reduce_metrics(outputs, weights, reducers) if outputs else {}
        if self.size > 1:
            metrics = combine_slots(
                [m for m in self.ctx.distributed.allgather((metrics, sum(weights))) if m[1] > 0],
                reducers,
            )
        return metrics

    def _evaluate_one(self, evaluate: Callable[..., Any], batch: Any, batch_idx: int) -> Any:
        """One ``evaluate_batch`` call, with ``batch_idx`` when the trial's signature takes it."""
        return evaluate(batch, batch_idx) if self._eval_takes_idx else evaluate(batch)

    def _batch_weight(self, batch: Any) -> float:
        """The weight of one ``evaluate_batch`` output in ``Reducer.AVG``: its record count."""
        return float(self.trial.get_batch_length(batch))

    def _evaluate_full(self) -> dict[str, Any]:
        # Determined runs evaluate_full_dataset on the chief only, over the whole (unsharded)
        # validation loader, and reports its values as returned; other ranks get its answer.
        metrics: dict[str, Any] = {}
        if self.is_chief:
            metrics = self.trial.evaluate_full_dataset(self._full_dataset_loader())
            if not isinstance(metrics, dict):
                raise TypeError(
                    f"evaluate_full_dataset must return a dict, got {type(metrics).__name__}"
                )
            metrics = plain_metrics(metrics)
        if self.size > 1:
            metrics = self.ctx.distributed.broadcast(metrics)
        return metrics

    def _full_dataset_loader(self) -> Any:
        """The chief's whole validation loader, from its start (``evaluate_full_dataset``)."""
        self.val_loader.set_position(0, 0)
        return self.val_loader.loader

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
                metrics.update(
                    run_reducers(self.ctx._reducers, self.ctx.distributed.allgather, training=False)
                )
        finally:
            for m, mode in zip(self.ctx.models, modes, strict=True):
                m.train(mode)
            ckpt.restore_rng_state(rng)
        steps = self.pos.batches_trained
        if self.is_chief:
            reported = {**self._time_metric(steps), **metrics}
            self.core.train.report_validation_metrics(
                steps_completed=steps, metrics=reported, epoch=self._epoch_float()
            )
        for cb in self.callbacks:
            cb.on_validation_end(metrics)
        self.last_validation = {"steps": steps, "metrics": metrics}
        improved = self._note_best(metrics)
        if self.checkpoint_policy == "all" or (self.checkpoint_policy == "best" and improved):
            self.checkpoint()
        return metrics

    def _time_metric(self, steps: int) -> dict[str, int]:
        """``{time_metric: value}`` for an ``adaptive_asha`` with ``time_metric`` ``batches`` or
        ``epochs``, which ranks trials by it (Determined's PyTorchTrial puts both in every
        validation); empty otherwise, so other searches report only the trial's metrics."""
        name = self.ctx._trainer_config.time_metric
        if name == "batches":
            return {"batches": steps}
        if name == "epochs":
            return {"epochs": self.pos.epoch_idx}
        return {}

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


def _numpy_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    # Determined hands on_validation_epoch_end each batch's metrics with tensors as ndarrays.
    return {
        k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v
        for k, v in metrics.items()
    }
