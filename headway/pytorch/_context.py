"""``PyTorchTrialContext``: what a ``PyTorchTrial`` uses to wrap its objects and read its config.

Names and semantics follow Determined's ``determined.pytorch.PyTorchTrialContext``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from headway.pytorch._lr_scheduler import LRScheduler
from headway.pytorch._metrics import MetricReducer, _FunctionReducer

if TYPE_CHECKING:
    from headway.core import DistributedContext

logger = logging.getLogger("headway.pytorch")


class _Position:
    """Where the training loop is; shared by the context and the loop."""

    __slots__ = ("batches_trained", "epoch_idx", "batch_in_epoch", "batches_per_epoch")

    def __init__(self) -> None:
        self.batches_trained = 0
        self.epoch_idx = 0
        self.batch_in_epoch = 0
        self.batches_per_epoch: int | None = None


def _pick_device(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % max(torch.cuda.device_count(), 1))
    return torch.device("cpu")


class PyTorchTrialContext:
    """Gives a trial its hyperparameters, device and distributed info, and wraps its objects.

    Built by ``headway.pytorch.init()`` (or the harness launcher), never by users. Wrap every
    model, optimizer and LR scheduler so that they are moved to the device, checkpointed and
    restored; otherwise a resumed trial will not continue where it stopped.

    Attributes:
        device (torch.device): ``cuda:<local_rank>`` when CUDA is available, else ``cpu``.
        distributed (headway.core.DistributedContext): rank / size of this worker.
        models, optimizers, lr_schedulers: wrapped objects, in wrap order.
    """

    def __init__(
        self,
        core_context: Any,
        *,
        hparams: dict[str, Any],
        exp_conf: dict[str, Any],
        trial_seed: int,
        trial_id: int,
        run_id: int,
        experiment_id: int | None = None,
        device: torch.device | None = None,
    ) -> None:
        self._core = core_context
        self.distributed: DistributedContext = core_context.distributed
        self._hparams = hparams
        self._exp_conf = exp_conf
        self._trial_seed = trial_seed
        self._trial_id = trial_id
        self._run_id = run_id
        self._experiment_id = experiment_id
        self.device = device or _pick_device(self.distributed.local_rank)
        self.models: list[torch.nn.Module] = []
        self._unwrapped_models: list[torch.nn.Module] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_schedulers: list[LRScheduler] = []
        self._scalers: list[Any] = []
        self._reducers: list[tuple[MetricReducer, str | None, bool, bool]] = []
        self._backward_passes: dict[int, int] = {}
        self._average_gradients: dict[int, bool] = {}
        self._stop_requested = False
        self._position = _Position()

    # -- config --------------------------------------------------------------------------------

    def get_hparams(self) -> dict[str, Any]:
        """All of this trial's hyperparameters (nested dicts kept nested)."""
        return self._hparams

    def get_hparam(self, name: str) -> Any:
        """One hyperparameter; raises ``ValueError`` naming it and the known names if missing."""
        if name not in self._hparams:
            raise ValueError(
                f"hyperparameter {name!r} is not defined; known: {sorted(self._hparams)}"
            )
        return self._hparams[name]

    def get_experiment_config(self) -> dict[str, Any]:
        """The experiment config (an empty dict in local mode unless ``exp_conf`` was given)."""
        return self._exp_conf

    def get_data_config(self) -> dict[str, Any]:
        """The config's ``data`` section (``{}`` when absent)."""
        return dict(self._exp_conf.get("data") or {})

    def get_trial_id(self) -> int:
        """This trial's id (0 in local mode unless given to ``init``)."""
        return self._trial_id

    def get_experiment_id(self) -> int | None:
        """The experiment's id, None in local mode."""
        return self._experiment_id

    def get_trial_seed(self) -> int:
        """The seed the harness seeded Python, NumPy and torch with."""
        return self._trial_seed

    def get_global_batch_size(self) -> int:
        """``hyperparameters.global_batch_size``; raises ``ValueError`` when it is not set."""
        gbs = self._hparams.get("global_batch_size")
        if isinstance(gbs, bool) or not isinstance(gbs, int) or gbs <= 0:
            raise ValueError(
                "hyperparameters.global_batch_size must be a positive integer "
                f"(got {gbs!r}); pass it in hparams to headway.pytorch.init() when local"
            )
        return gbs

    def get_per_slot_batch_size(self) -> int:
        """``global_batch_size // slots``: the batch size each worker's DataLoader should use.

        Raises ``ValueError`` when the global batch size is smaller than the number of slots.
        """
        gbs = self.get_global_batch_size()
        size = self.distributed.size
        if gbs < size:
            raise ValueError(
                f"hyperparameters.global_batch_size ({gbs}) is smaller than the number of "
                f"slots ({size})"
            )
        if gbs % size:
            logger.warning(
                "global_batch_size %d is not divisible by %d slots; using %d per slot",
                gbs,
                size,
                gbs // size,
            )
        return gbs // size

    def get_stop_requested(self) -> bool:
        """Whether the trial asked to stop early (``set_stop_requested(True)``)."""
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the harness to end training after this batch (validate, checkpoint, complete)."""
        self._stop_requested = bool(stop_requested)

    # -- position ------------------------------------------------------------------------------

    def current_train_batch(self) -> int:
        """0-based index of the batch being trained, counted over the whole trial."""
        return self._position.batches_trained

    def current_train_epoch(self) -> int:
        """0-based index of the epoch being trained."""
        return self._position.epoch_idx

    def is_epoch_start(self) -> bool:
        """True while training the first batch of an epoch."""
        return self._position.batch_in_epoch == 0

    def is_epoch_end(self) -> bool:
        """True while training the last batch of an epoch (False if the length is unknown)."""
        per_epoch = self._position.batches_per_epoch
        return per_epoch is not None and self._position.batch_in_epoch == per_epoch - 1

    # -- wrapping ------------------------------------------------------------------------------

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Move ``model`` to ``device`` and register it for checkpointing.

        With more than one slot (and ``torch.distributed`` initialised) the returned model is
        a ``DistributedDataParallel`` wrapper; checkpoints always hold the inner module's state.
        """
        model = model.to(self.device)
        self._unwrapped_models.append(model)
        wrapped: torch.nn.Module = model
        if self.distributed.size > 1 and torch.distributed.is_initialized():
            ids = [self.device.index] if self.device.type == "cuda" else None
            wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        self.models.append(wrapped)
        return wrapped

    def wrap_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        backward_passes_per_step: int = 1,
        fp16_compression: bool = False,
        average_aggregated_gradients: bool = True,
    ) -> torch.optim.Optimizer:
        """Register ``optimizer`` for checkpointing and ``step_optimizer``.

        Arguments:
            optimizer (torch.optim.Optimizer): built over wrapped models' parameters.
            backward_passes_per_step (int): aggregate gradients over this many batches; the
                optimizer only steps on every n-th ``step_optimizer`` call.
            fp16_compression (bool): Determined's fp16 gradient compression for multi-process
                all-reduce; only False is supported (a trial runs as one process).
            average_aggregated_gradients (bool): with ``backward_passes_per_step > 1``, divide
                the accumulated gradients by the number of passes before stepping (True, the
                default, as Determined), or step on their sum (False).

        Raises:
            ValueError: naming the argument: a non-positive ``backward_passes_per_step``, or
                ``fp16_compression=True``.
        """
        if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
            raise ValueError(
                f"backward_passes_per_step must be a positive int, got {backward_passes_per_step}"
            )
        if fp16_compression:
            raise ValueError(
                "wrap_optimizer(fp16_compression=True) is not supported: it compresses gradients "
                "for multi-process all-reduce, and a Headway trial runs as one process"
            )
        self.optimizers.append(optimizer)
        self._backward_passes[id(optimizer)] = backward_passes_per_step
        self._average_gradients[id(optimizer)] = bool(average_aggregated_gradients)
        return optimizer

    def wrap_lr_scheduler(
        self, lr_scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1
    ) -> Any:
        """Register ``lr_scheduler`` to be stepped per ``step_mode`` and checkpointed.

        Returns the scheduler itself (call ``step()`` on it with ``MANUAL_STEP``). Raises
        ``ValueError`` for a bad ``step_mode`` / ``frequency``.
        """
        self.lr_schedulers.append(LRScheduler(lr_scheduler, step_mode, frequency))
        return lr_scheduler

    def wrap_scaler(self, scaler: Any) -> Any:
        """Register an AMP ``torch.amp.GradScaler``: checkpointed, ``update()``d after each batch.

        Pass it to ``step_optimizer(..., scaler=scaler)`` and scale the loss yourself.
        """
        self._scalers.append(scaler)
        return scaler

    def wrap_reducer(
        self,
        reducer: MetricReducer | Callable[[list[Any]], Any],
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> MetricReducer:
        """Register a custom metric reducer (a ``MetricReducer`` or ``fn(values) -> value``).

        A function becomes a reducer with ``update(value)``; the function gets every value
        updated on every slot since the last reset. Without ``name`` the reducer must produce a
        dict of metrics. Returns the reducer to call ``update`` on.
        """
        if not isinstance(reducer, MetricReducer):
            if not callable(reducer):
                raise TypeError("wrap_reducer() needs a MetricReducer or a callable")
            if name is None:
                raise ValueError("wrap_reducer(fn) needs a name for the metric")
            reducer = _FunctionReducer(reducer)
        self._reducers.append((reducer, name, for_training, for_validation))
        return reducer

    # -- training step -------------------------------------------------------------------------

    def backward(
        self,
        loss: torch.Tensor,
        gradient: torch.Tensor | None = None,
        retain_graph: bool = False,
        create_graph: bool = False,
    ) -> None:
        """Compute gradients of ``loss`` (same arguments as ``torch.Tensor.backward``)."""
        loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Callable[[Iterator[torch.nn.Parameter]], None] | None = None,
        auto_zero_grads: bool = True,
        scaler: Any = None,
    ) -> None:
        """Step ``optimizer``, then zero its gradients.

        Arguments:
            optimizer: one returned by ``wrap_optimizer``.
            clip_grads: called with the optimizer's parameters before the step, e.g.
                ``lambda params: torch.nn.utils.clip_grad_norm_(params, 1.0)``.
            auto_zero_grads (bool): zero gradients after stepping.
            scaler: a wrapped ``GradScaler`` to step through (AMP).

        With ``backward_passes_per_step = n`` only every n-th call steps. Raises ``ValueError``
        if ``optimizer`` was not wrapped.
        """
        passes = self._backward_passes.get(id(optimizer))
        if passes is None:
            raise ValueError("step_optimizer(): wrap the optimizer with wrap_optimizer() first")
        if passes > 1 and (self._position.batches_trained + 1) % passes != 0:
            return
        if passes > 1 and self._average_gradients[id(optimizer)]:
            _scale_gradients(optimizer, 1.0 / passes)
        if clip_grads is not None:
            if scaler is not None:
                scaler.unscale_(optimizer)
            clip_grads(p for group in optimizer.param_groups for p in group["params"])
        if scaler is not None:
            scaler.step(optimizer)
        else:
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad(set_to_none=True)
        for sched in self.lr_schedulers:
            if (
                sched.step_mode is LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP
                and sched.optimizer is optimizer
            ):
                sched._on_optimizer_step()

    def to_device(self, data: Any) -> Any:
        """Move tensors and ndarrays in (nested) dicts / lists / tuples to ``device``.

        ndarrays become tensors; other leaves are returned unchanged.
        """
        return _to_device(data, self.device)


@torch.no_grad()
def _scale_gradients(optimizer: torch.optim.Optimizer, factor: float) -> None:
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad.mul_(factor)


def _to_device(data: Any, device: torch.device) -> Any:
    if isinstance(data, torch.Tensor):
        if data.device == device:
            return data
        return data.to(device, non_blocking=True)
    if isinstance(data, np.ndarray):
        return torch.from_numpy(data).to(device)
    if isinstance(data, dict):
        return {k: _to_device(v, device) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_to_device(v, device) for v in data))
    if isinstance(data, list | tuple):
        return type(data)(_to_device(v, device) for v in data)
    return data
