"""``PyTorchTrialContext``: what a ``PyTorchTrial`` uses to wrap its objects and read its config.

Names and semantics follow Determined's ``determined.pytorch.PyTorchTrialContext``. This module
holds the config, position and wrapping methods; the class inherits ``wrap_optimizer``,
``backward`` and ``step_optimizer`` from ``ContextOptimization`` (``_optimization.py``) and the
TensorBoard, profiler and AMP methods from ``ContextExtras`` (``_context_extras.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from headway.pytorch._context_extras import ContextExtras
from headway.pytorch._lr_scheduler import LRScheduler
from headway.pytorch._metrics import MetricReducer, _FunctionReducer
from headway.pytorch._optimization import ContextOptimization
from headway.pytorch._trainer_config import TrainerConfig

if TYPE_CHECKING:
    from headway.core import DistributedContext

logger = logging.getLogger("headway.pytorch")


class _Position:
    """Where the training loop is; shared by the context and the loop."""

    __slots__ = ("batch_in_epoch", "batches_per_epoch", "batches_trained", "epoch_idx")

    def __init__(self) -> None:
        self.batches_trained = 0
        self.epoch_idx = 0
        self.batch_in_epoch = 0
        self.batches_per_epoch: int | None = None


def _pick_device(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % max(torch.cuda.device_count(), 1))
    return torch.device("cpu")


class PyTorchTrialContext(ContextOptimization, ContextExtras):
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
        trainer_config: TrainerConfig | None = None,
        trial_id: int,
        run_id: int,
        experiment_id: int | None = None,
        device: torch.device | None = None,
        aggregation_frequency: int = 1,
        average_aggregated_gradients: bool = True,
    ) -> None:
        self._init_optimization(aggregation_frequency, average_aggregated_gradients)
        self._core = core_context
        self.distributed: DistributedContext = core_context.distributed
        self._hparams = hparams
        self._exp_conf = exp_conf
        # Headway's own reads of the config, typed (None: read from the local exp_conf).
        self._trainer_config = trainer_config or TrainerConfig.from_local(exp_conf)
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
        self._stop_requested = False
        self._position: _Position = _Position()
        self._initial_batch: int | None = None  # get_initial_batch(), read on first use

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
        """The experiment config as a mapping (Determined's API; an empty dict in local mode
        unless ``exp_conf`` was given). On the cluster it is the config as the master stored
        it; Headway itself reads the typed config it was validated into."""
        return self._exp_conf

    def get_data_config(self) -> dict[str, Any]:
        """The config's ``data`` section (``{}`` when absent)."""
        return dict(self._trainer_config.data)

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

    def get_initial_batch(self) -> int:
        """The batch this run starts training at (Determined's ``get_initial_batch()``): the
        latest checkpoint's ``steps_completed`` when the trial resumes its own checkpoint on
        the cluster (after a pause or a restart), 0 on a fresh start, a warm start from another
        trial's checkpoint, and in local mode (as in Determined).

        Known from ``__init__`` on, before ``fit()`` restores anything: on a resume it reads
        the checkpoint's metadata once.
        """
        if self._initial_batch is None:
            info = self._core.info
            initial = 0
            if info is not None and info.latest_checkpoint is not None:
                metadata = self._core.checkpoint.get_metadata(info.latest_checkpoint) or {}
                if metadata.get("trial_id") == self._trial_id:
                    initial = int(metadata.get("steps_completed") or 0)
            self._initial_batch = initial
        return self._initial_batch

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
        self._amp_wrap_forward(model)  # no-op unless experimental.use_amp()
        self._unwrapped_models.append(model)
        wrapped: torch.nn.Module = model
        if self.distributed.size > 1 and torch.distributed.is_initialized():
            ids = [self.device.index] if self.device.type == "cuda" else None
            wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        self.models.append(wrapped)
        return wrapped

    def wrap_lr_scheduler(
        self, lr_scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1
    ) -> Any:
        """Register ``lr_scheduler`` to be stepped per ``step_mode`` and checkpointed.

        Returns the scheduler itself (call ``step()`` on it with ``MANUAL_STEP``).

        Raises:
            ValueError: the scheduler's ``optimizer`` was not returned by ``wrap_optimizer``,
                a bad ``step_mode`` / ``frequency``, or a ``ReduceLROnPlateau`` with a step
                mode other than ``MANUAL_STEP`` (its ``step()`` needs the metric, so step it
                yourself, e.g. from a callback's ``on_validation_end``), as Determined does.
        """
        if isinstance(lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau) and (
            step_mode is not LRScheduler.StepMode.MANUAL_STEP
        ):
            raise ValueError(
                "wrap_lr_scheduler(): torch.optim.lr_scheduler.ReduceLROnPlateau needs the metric "
                "in step(), so it can only be wrapped with step_mode=LRScheduler.StepMode."
                f"MANUAL_STEP (got {step_mode}). Step it yourself, e.g. from a PyTorchCallback: "
                "def on_validation_end(self, metrics): "
                'self.scheduler.step(metrics["validation_loss"])'
            )
        optimizer = getattr(lr_scheduler, "optimizer", None)
        if optimizer is not None and not any(optimizer is o for o in self.optimizers):
            # Determined: "Must use an optimizer that is returned by wrap_optimizer()." An
            # unwrapped optimizer is neither checkpointed nor stepped by step_optimizer, so the
            # schedule would act on an optimizer the harness never sees.
            raise ValueError(
                "wrap_lr_scheduler(): must use an optimizer that is returned by "
                f"wrap_optimizer(); this {type(lr_scheduler).__name__}'s optimizer was not "
                "wrapped (call context.wrap_optimizer(optimizer) first and build the scheduler "
                "on the optimizer it returns)"
            )
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

        A function becomes a reducer with ``update(value)``; at each report the function gets
        every value updated on every slot since the last reset (slots interleaved, so the
        original order comes back when each slot calls ``update`` once per batch). With
        ``name`` the reducer's result is the metric ``name`` and must not be a dict; with
        ``name=None`` it must be a dict of ``{metric name: value}`` (checked when reducing,
        raising ``ValueError``). Returns the reducer to call ``update`` on.

        Raises:
            TypeError: ``reducer`` is neither a ``MetricReducer`` nor callable.
            ValueError: the same reducer object is wrapped twice.

        Source: Determined ``_PyTorchReducerContext.wrap_reducer`` (pytorch/_reducer.py).
        """
        if any(wrapped is reducer for wrapped, *_ in self._reducers):
            raise ValueError(
                f"wrap_reducer(): this {type(reducer).__name__} is already wrapped; wrap each "
                "reducer object once"
            )
        if not isinstance(reducer, MetricReducer):
            if not callable(reducer):
                raise TypeError(
                    f"wrap_reducer() needs a MetricReducer or a function, got "
                    f"{type(reducer).__name__}"
                )
            reducer = _FunctionReducer(reducer)
        self._reducers.append((reducer, name, for_training, for_validation))
        return reducer

    # -- data ----------------------------------------------------------------------------------

    def to_device(self, data: Any) -> Any:
        """Move tensors and ndarrays in (nested) dicts / lists / tuples to ``device``.

        ndarrays become tensors; other leaves are returned unchanged.
        """
        return _to_device(data, self.device)

    def _batch_to_device(self, batch: Any) -> Any:
        """What the harness hands ``train_batch`` / ``evaluate_batch``: ``to_device(batch)``,
        or the batch as loaded after ``experimental.disable_auto_to_device()``."""
        if self._experimental is not None and not self._experimental._auto_to_device:
            return batch
        return _to_device(batch, self.device)


def _to_device(data: Any, device: torch.device) -> Any:
    if isinstance(data, torch.Tensor):
        if data.device == device:
            return data
        return data.to(device, non_blocking=True)
    if type(data) is list or type(data) is tuple:
        # The usual batch, ``(inputs, labels)``: one pass without a generator or a call per
        # tensor (this runs for every batch; the general path below cost ~3 us a batch).
        moved = [
            v if type(v) is torch.Tensor and v.device == device else _to_device(v, device)
            for v in data
        ]
        return moved if type(data) is list else tuple(moved)
    if isinstance(data, np.ndarray):
        return torch.from_numpy(data).to(device)
    if isinstance(data, dict):
        return {k: _to_device(v, device) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_to_device(v, device) for v in data))
    if isinstance(data, list | tuple):
        return type(data)(_to_device(v, device) for v in data)
    return data
