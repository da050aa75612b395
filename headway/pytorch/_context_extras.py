"""TensorBoard, profiler and AMP methods of ``PyTorchTrialContext`` (Determined's names).

Kept apart from ``_context.py`` so the wrapping and stepping code stays short; the context class
inherits ``ContextExtras``. Sources: Determined 0.38.1 ``pytorch/_pytorch_context.py``
(``get_tensorboard_path``, ``get_tensorboard_writer``, ``set_profiler``, ``configure_apex_amp``,
``autocast_forward_pass``) and ``pytorch/_experimental.py`` (``use_amp``).
"""

from __future__ import annotations

import functools
import logging
import pathlib
from typing import TYPE_CHECKING, Any

import torch

from headway.pytorch import _tensorboard

if TYPE_CHECKING:
    from headway.core import DistributedContext

logger = logging.getLogger("headway.pytorch")


class PyTorchExperimentalContext:
    """``context.experimental``: Determined's experimental switches (``use_amp()``,
    ``disable_dataset_reproducibility_checks()``, ``disable_auto_to_device()``)."""

    def __init__(self, parent: ContextExtras) -> None:
        self._parent = parent
        self._auto_amp = False
        self._data_repro_checks_disabled = False
        self._auto_to_device = True

    def disable_dataset_reproducibility_checks(self) -> None:
        """Let ``build_training_data_loader`` / ``build_validation_data_loader`` return any
        ``torch.utils.data.DataLoader`` (or other iterable of batches) instead of a
        ``headway.pytorch.DataLoader``, as Determined's switch of the same name does.

        Without it such a loader is refused (``TypeError``). With it the harness uses the loader
        as it is: no sharding across slots, no reseeded shuffle; a resumed trial skips the
        batches already trained (an iterable without ``len()`` makes epochs unknown, so use
        ``Batch`` lengths). Reproducible order and sharding become the trial's job. Call it in
        the trial's ``__init__``.
        """
        self._data_repro_checks_disabled = True
        logger.info("disabled dataset reproducibility checks")

    def disable_auto_to_device(self) -> None:
        """Stop the harness from moving each batch to ``context.device`` before ``train_batch``
        / ``evaluate_batch`` (Determined's switch of the same name): batches arrive as the
        data loader yields them, and the trial calls ``context.to_device`` on what it wants
        moved. Call it in the trial's ``__init__``.
        """
        self._auto_to_device = False
        logger.info("disabled automatically moving data to device")

    def use_amp(self) -> None:
        """Automatic mixed precision with a default ``GradScaler``, as Determined's ``use_amp``.

        Models wrapped afterwards run their forward pass under ``torch.autocast`` (float16 on
        CUDA, bfloat16 on CPU) and return float32 tensors; ``context.backward`` scales the loss;
        ``step_optimizer`` unscales before ``clip_grads`` and steps through the scaler, which the
        harness updates after every batch. On CPU the scaler is disabled (bfloat16 has float32's
        range, so there is nothing to scale). Call it before ``wrap_model``.

        Raises:
            RuntimeError: when a model was already wrapped, or a scaler was already wrapped
                (Determined: "Please only call wrap_scaler or use_amp once").
        """
        parent = self._parent
        if parent.models:
            raise RuntimeError("context.experimental.use_amp() must be called before wrap_model()")
        if parent._scalers:
            raise RuntimeError("Please only call wrap_scaler or use_amp once.")
        device_type = parent.device.type
        parent._scalers.append(torch.amp.GradScaler(device_type, enabled=device_type == "cuda"))
        self._auto_amp = True


class ContextExtras:
    """Mixin of ``PyTorchTrialContext``: TensorBoard, ``set_profiler``, AMP helpers."""

    # Set by PyTorchTrialContext.__init__; declared here for the type checker.
    device: torch.device
    distributed: DistributedContext
    models: list[torch.nn.Module]
    _scalers: list[Any]
    _trial_id: int

    _core: Any  # the Core API context

    # Created on first use, so the context's __init__ needs no changes for them.
    _tbd_writer: Any = None
    _experimental: PyTorchExperimentalContext | None = None
    profiler: Any = None
    """The ``torch.profiler.profile`` set by ``set_profiler`` (None until then)."""

    # -- TensorBoard -----------------------------------------------------------------------------

    def get_tensorboard_path(self) -> pathlib.Path:
        """The folder for files TensorBoard should read (created on first call).

        Everything written here is copied into each checkpoint this trial saves, under
        ``tensorboard/`` (unless ``set_enable_tensorboard_logging(False)``), and
        ``headway tensorboard EXPERIMENT_ID`` shows it. It is the Core API's
        ``core_context.train.get_tensorboard_path()``.
        """
        path: pathlib.Path = self._core.train.get_tensorboard_path()
        return path

    def get_tensorboard_writer(self) -> Any:
        """A ``torch.utils.tensorboard.SummaryWriter`` writing into ``get_tensorboard_path()``.

        The same writer is returned on every call; the harness flushes it before each
        checkpoint. Example::

            self.writer = context.get_tensorboard_writer()
            self.writer.add_scalar("my_metric", value, batch_idx)

        Raises:
            ImportError: when the ``tensorboard`` package is not installed.
        """
        if self._tbd_writer is None:
            self._tbd_writer = _tensorboard.user_writer(self._core)
        return self._tbd_writer

    def set_enable_tensorboard_logging(self, enable_tensorboard_logging: bool) -> None:
        """Switch automatic TensorBoard logging (default on, ``pytorch.init`` sets it): the
        reported training / validation metrics written as ``Headway/<name>`` scalars at report
        time, and the folder stored with checkpoints. Off: neither (Determined's switch).

        Raises:
            TypeError: when the value is not a bool.
        """
        _tensorboard.set_enabled(self._core, enable_tensorboard_logging)

    def get_enable_tensorboard_logging(self) -> bool:
        """Whether automatic TensorBoard logging is on (``set_enable_tensorboard_logging``)."""
        return _tensorboard.files_of(self._core).enabled

    # -- profiler --------------------------------------------------------------------------------

    def set_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Profile training with ``torch.profiler`` (Determined's ``set_profiler``).

        Arguments are passed to ``torch.profiler.profile`` except ``on_trace_ready``, which is
        set to ``torch.profiler.tensorboard_trace_handler(get_tensorboard_path())`` so traces
        are stored with the trial's checkpoints. The harness starts the profiler when training
        starts, calls ``step()`` after every training batch and stops it when ``fit()`` ends.
        Example (skip 1 batch, warm up on 1, record 2)::

            context.set_profiler(
                activities=[torch.profiler.ProfilerActivity.CPU],
                schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
            )

        Raises:
            ValueError: when ``on_trace_ready`` is passed (Headway decides where traces go).
        """
        if "on_trace_ready" in kwargs:
            raise ValueError(
                "set_profiler(on_trace_ready=...) is not accepted: traces go to "
                "get_tensorboard_path()"
            )
        self.profiler = torch.profiler.profile(
            *args,
            on_trace_ready=torch.profiler.tensorboard_trace_handler(
                str(self.get_tensorboard_path())
            ),
            **kwargs,
        )

    # -- AMP ---------------------------------------------------------------------------------------

    @property
    def experimental(self) -> PyTorchExperimentalContext:
        """Determined's ``context.experimental`` (``use_amp()``)."""
        if self._experimental is None:
            self._experimental = PyTorchExperimentalContext(self)
        return self._experimental

    def configure_apex_amp(
        self, models: Any, optimizers: Any, enabled: bool | None = True, **kwargs: Any
    ) -> tuple[Any, Any]:
        """NVIDIA apex AMP is not supported; use ``context.experimental.use_amp()``.

        Determined 0.38.1 deprecates apex (FutureWarning) and returns ``(models, optimizers)``
        unchanged when ``enabled=False`` or outside training; Headway does the same in those
        cases (a ``CheckpointLoadContext`` counts as outside training).

        Raises:
            RuntimeError: naming ``configure_apex_amp`` when ``enabled`` is true in training.
        """
        if not enabled or not self._managed_training():
            return models, optimizers
        raise RuntimeError(
            "context.configure_apex_amp() is not supported: NVIDIA apex is deprecated "
            "(Determined 0.38 warns it will be removed); use context.experimental.use_amp() "
            "for automatic mixed precision, or torch.autocast with context.wrap_scaler()"
        )

    def _managed_training(self) -> bool:
        return True

    def _amp_auto(self) -> bool:
        return self._experimental is not None and self._experimental._auto_amp

    def _amp_wrap_forward(self, model: torch.nn.Module) -> None:
        """With ``use_amp()``: run ``model``'s forward under autocast, outputs back to float32."""
        if not self._amp_auto():
            return
        dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        model.forward = functools.partial(_autocast_forward, model.forward, self.device.type, dtype)

    def _amp_scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """With ``use_amp()``: the loss multiplied by the scaler's scale."""
        if self._amp_auto():
            scaled: torch.Tensor = self._scalers[0].scale(loss)
            return scaled
        return loss

    def _amp_scaler(self, scaler: Any) -> Any:
        """The scaler ``step_optimizer`` uses: the given one, else the ``use_amp()`` one."""
        if scaler is None and self._amp_auto():
            return self._scalers[0]
        return scaler


def _autocast_forward(
    forward: Any, device_type: str, dtype: torch.dtype, *args: Any, **kw: Any
) -> Any:
    with torch.autocast(device_type=device_type, dtype=dtype):
        output = forward(*args, **kw)
    return _to_float32(output)


def _to_float32(output: Any) -> Any:
    # Losses are computed outside autocast, in float32 (Determined's end_fp16 hook).
    if isinstance(output, torch.Tensor):
        return output.float() if output.dtype in (torch.float16, torch.bfloat16) else output
    if isinstance(output, dict):
        return {k: _to_float32(v) for k, v in output.items()}
    if isinstance(output, list):
        return [_to_float32(v) for v in output]
    if isinstance(output, tuple) and not hasattr(output, "_fields"):
        return tuple(_to_float32(v) for v in output)
    return output
