"""``DeepSpeedTrialContext``: what a ``DeepSpeedTrial`` uses to register engines and read config.

Names and semantics follow Determined's ``determined.pytorch.deepspeed.DeepSpeedTrialContext``
(0.38). It extends Headway's ``PyTorchTrialContext`` (hyperparameters, config, device,
``to_device``, ``wrap_reducer``, TensorBoard, profiler, position), replaces ``wrap_model`` /
``wrap_optimizer`` / ``wrap_lr_scheduler`` by ``wrap_model_engine`` (the optimizer and scheduler
belong to the DeepSpeed engine), and refuses the PyTorchTrial-only calls with a ``TypeError``
that says what to use instead.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import random
import warnings
from typing import Any, NoReturn

import deepspeed

from headway.expconf import parse_local_config, sample_hparams
from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch.deepspeed._mpu import (
    ModelParallelUnit,
    make_data_parallel_mpu,
    make_deepspeed_mpu,
)

logger = logging.getLogger("headway.pytorch.deepspeed")


class DeepSpeedTrialContext(PyTorchTrialContext):
    """Gives a ``DeepSpeedTrial`` its hyperparameters, device and ranks; registers its engines.

    Built by ``headway.pytorch.deepspeed.init()`` (or the harness), never by users. In
    ``__init__`` a trial builds its engines with ``deepspeed.initialize`` and registers each with
    ``wrap_model_engine``; the harness then checkpoints them (``engine.save_checkpoint``),
    derives batch sizes from the first one, and calls ``train_batch`` once per micro-batch of
    gradient accumulation.

    Attributes:
        models (list[deepspeed.DeepSpeedEngine]): the wrapped engines, in wrap order.
        device (torch.device): ``cuda:<local_rank>`` with CUDA, else ``cpu``.
        distributed (headway.core.DistributedContext): rank / size of this process.
    """

    def __init__(self, core_context: Any, **kwargs: Any) -> None:
        super().__init__(core_context, **kwargs)
        self._mpu: ModelParallelUnit = make_data_parallel_mpu(self.distributed)
        self._called_set_mpu = False
        self._train_micro_batch_size_per_gpu: int | None = None
        self._num_micro_batches_per_slot: int | None = None
        self._use_pipeline_parallel = False
        self._data_repro_checks_disabled = False
        self._manual_grad_accumulation = False

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> DeepSpeedTrialContext:
        """A context for debugging a ``DeepSpeedTrial`` outside a cluster, without a ``with``.

        Determined's ``TrialContext.from_config``: hyperparameters are drawn from
        ``config["hyperparameters"]`` as a random searcher would (constants as given; the
        draw is seeded by ``reproducibility.experiment_seed``, default 0), then the context is
        ``headway.pytorch.deepspeed.init(hparams=, exp_conf=config)``, left open until the
        process exits (``atexit``), checkpoints in the local default directory.

        Arguments:
            config (dict): an experiment config, whole or any subset of its fields, validated as
                local mode's (``headway.expconf.parse_local_config``).

        Raises:
            TypeError: ``config`` is not a dict.
            headway.expconf.ConfigError: a field that does not validate (the message names
                it).
        """
        from headway.pytorch.deepspeed._trainer import init  # it imports this module

        if not isinstance(config, dict):
            raise TypeError(
                f"from_config() takes the config as a dict, got {type(config).__name__}"
            )
        parsed = parse_local_config(config)
        seed = parsed.reproducibility.experiment_seed or 0
        hparams = sample_hparams(parsed.hyperparameters, random.Random(seed))
        stack = contextlib.ExitStack()
        context = stack.enter_context(init(hparams=hparams, exp_conf=config))
        atexit.register(stack.close)
        return context

    # -- engines -------------------------------------------------------------------------------

    def wrap_model_engine(self, model: Any) -> Any:
        """Register a DeepSpeed engine for checkpointing and batch-size bookkeeping; return it.

        The first engine decides ``train_micro_batch_size_per_gpu`` and
        ``gradient_accumulation_steps`` (``get_num_micro_batches_per_slot()``); a
        ``PipelineEngine`` also decides the ``ModelParallelUnit`` (from its grid). Later engines
        must use the same data-parallel size; a different micro-batch size or accumulation only
        logs a warning (the first engine's values drive the loop), as in Determined.

        Raises:
            TypeError: ``model`` is not a ``deepspeed.DeepSpeedEngine`` (e.g. the tuple
                ``deepspeed.initialize`` returns).
            ValueError: the engine is already wrapped; its data-parallel size differs from the
                first engine's; or ``hyperparameters.global_batch_size`` differs from the
                engine's ``train_batch_size`` (micro-batch x accumulation x data-parallel size).
        """
        if not isinstance(model, deepspeed.DeepSpeedEngine):
            raise TypeError(
                "wrap_model_engine() needs a deepspeed.DeepSpeedEngine (the first item of what "
                f"deepspeed.initialize() returns), got {type(model).__name__}"
            )
        if any(m is model for m in self.models):
            raise ValueError("wrap_model_engine(): this engine is already wrapped")
        micro = int(model.train_micro_batch_size_per_gpu())
        accumulation = int(model.gradient_accumulation_steps())
        if isinstance(model, deepspeed.PipelineEngine):
            self._use_pipeline_parallel = True
            if not self.models:
                self._mpu = make_deepspeed_mpu(model.grid)
            else:
                logger.warning("several engines: the first wrapped engine's MPU is used")
        if not self.models:
            self._check_global_batch_size(int(model.train_batch_size()), micro, accumulation)
            self._train_micro_batch_size_per_gpu = micro
            self._num_micro_batches_per_slot = accumulation
        else:
            first = self.models[0]
            if int(model.dp_world_size) != int(first.dp_world_size):  # type: ignore[arg-type]
                raise ValueError(
                    f"wrap_model_engine(): engine {len(self.models) + 1} has data-parallel size "
                    f"{model.dp_world_size}, the first engine {first.dp_world_size}; engines "
                    "must share one data-parallel / model-parallel unit"
                )
            if micro != self._train_micro_batch_size_per_gpu:
                logger.warning(
                    "engine %d: train_micro_batch_size_per_gpu %d differs from the first "
                    "engine's %s; the data loaders and sample counts follow the first engine",
                    len(self.models) + 1,
                    micro,
                    self._train_micro_batch_size_per_gpu,
                )
            if accumulation != self._num_micro_batches_per_slot:
                logger.warning(
                    "engine %d: gradient_accumulation_steps %d differs from the first engine's "
                    "%s; train_batch() is called per the first engine's value",
                    len(self.models) + 1,
                    accumulation,
                    self._num_micro_batches_per_slot,
                )
        self.models.append(model)
        return model

    def _check_global_batch_size(self, train_batch_size: int, micro: int, steps: int) -> None:
        wanted = self._hparams.get("global_batch_size")
        if wanted is not None and wanted != train_batch_size:
            raise ValueError(
                f"hyperparameters.global_batch_size ({wanted!r}) differs from the engine's "
                f"train_batch_size ({train_batch_size} = train_micro_batch_size_per_gpu {micro} "
                f"x gradient_accumulation_steps {steps} x data-parallel size "
                f"{train_batch_size // max(micro * steps, 1)}); make them agree, e.g. with "
                'overwrite_deepspeed_config(ds_config, {"train_batch_size": '
                "context.get_global_batch_size()})"
            )

    def set_mpu(self, mpu: ModelParallelUnit) -> None:
        """Use a custom model-parallel unit (after ``wrap_model_engine``, at most once).

        Its data-parallel rank and size shard the data loaders; ``should_build_data_loader``
        and ``should_report_metrics`` pick the ranks that load data and report metrics. With
        several engines, the unit and the data loaders belong to the first one.

        Raises:
            TypeError: ``mpu`` is not a ``ModelParallelUnit``.
            RuntimeError: no engine is wrapped yet, or ``set_mpu`` was already called.
        """
        if not isinstance(mpu, ModelParallelUnit):
            raise TypeError(f"set_mpu() needs a ModelParallelUnit, got {type(mpu).__name__}")
        if not self.models:
            raise RuntimeError("set_mpu(): call wrap_model_engine() first")
        if self._called_set_mpu:
            raise RuntimeError("set_mpu() may be called once per trial")
        self._called_set_mpu = True
        self._mpu = mpu

    def disable_auto_grad_accumulation(self) -> None:
        """Call ``train_batch`` once per batch instead of once per micro-batch: ``train_batch``
        must then run all ``get_num_micro_batches_per_slot()`` micro-batches itself."""
        self._manual_grad_accumulation = True

    def disable_dataset_reproducibility_checks(self) -> None:
        """Allow ``build_*_data_loader`` to return any ``torch.utils.data.DataLoader`` (or other
        sized iterable) instead of ``headway.pytorch.DataLoader``.

        The harness then neither shards it across data-parallel ranks nor reseeds its shuffle,
        and resumes it by skipping the batches already trained: reproducible order and sharding
        become the trial's job.
        """
        self._data_repro_checks_disabled = True

    @property
    def use_pipeline_parallel(self) -> bool:
        """Whether a wrapped engine is a ``deepspeed.PipelineEngine``."""
        return self._use_pipeline_parallel

    # -- batch sizes ---------------------------------------------------------------------------

    def get_train_micro_batch_size_per_gpu(self) -> int:
        """The first engine's ``train_micro_batch_size_per_gpu``: the batch size of each data
        loader batch. Raises ``RuntimeError`` before ``wrap_model_engine``."""
        if self._train_micro_batch_size_per_gpu is None:
            raise RuntimeError(
                "call wrap_model_engine() before get_train_micro_batch_size_per_gpu()"
            )
        return self._train_micro_batch_size_per_gpu

    def get_num_micro_batches_per_slot(self) -> int:
        """The first engine's ``gradient_accumulation_steps``: micro-batches per batch and
        data-parallel rank. Raises ``RuntimeError`` before ``wrap_model_engine``."""
        if self._num_micro_batches_per_slot is None:
            raise RuntimeError("call wrap_model_engine() before get_num_micro_batches_per_slot()")
        return self._num_micro_batches_per_slot

    @property
    def train_micro_batch_size_per_gpu(self) -> int:
        """Deprecated (Determined 0.38): use ``get_train_micro_batch_size_per_gpu()``."""
        warnings.warn(
            "DeepSpeedTrialContext.train_micro_batch_size_per_gpu is deprecated; use "
            "get_train_micro_batch_size_per_gpu()",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_train_micro_batch_size_per_gpu()

    @property
    def num_micro_batches_per_slot(self) -> int:
        """Deprecated (Determined 0.38): use ``get_num_micro_batches_per_slot()``."""
        warnings.warn(
            "DeepSpeedTrialContext.num_micro_batches_per_slot is deprecated; use "
            "get_num_micro_batches_per_slot()",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_num_micro_batches_per_slot()

    def get_global_batch_size(self) -> int:
        """Records per batch over all data-parallel ranks.

        ``hyperparameters.global_batch_size`` when set (``wrap_model_engine`` checks that it
        equals the engine's ``train_batch_size``), else the first engine's
        ``train_batch_size``.

        Raises:
            ValueError: neither is known yet (no such hyperparameter and no engine wrapped), or
                the hyperparameter is not a positive integer.
        """
        if self._hparams.get("global_batch_size") is not None:
            return super().get_global_batch_size()
        if self.models:
            return int(self.models[0].train_batch_size())  # type: ignore[operator]
        raise ValueError(
            "the global batch size is not known yet: set hyperparameters.global_batch_size or "
            "call wrap_model_engine() first"
        )

    def get_per_slot_batch_size(self) -> int:
        """Records per batch on each data-parallel rank: ``get_global_batch_size()`` divided by
        the data-parallel size (``train_micro_batch_size_per_gpu`` x accumulation steps)."""
        return self.get_global_batch_size() // max(self._mpu.data_parallel_world_size, 1)

    # -- PyTorchTrial-only calls ----------------------------------------------------------------

    def _not_here(self, name: str, instead: str) -> NoReturn:
        raise TypeError(f"DeepSpeedTrialContext has no {name}(): {instead}")

    def wrap_model(self, model: Any) -> Any:
        """Not available: build an engine with ``deepspeed.initialize`` and wrap that."""
        self._not_here("wrap_model", "pass deepspeed.initialize()'s engine to wrap_model_engine()")

    def wrap_optimizer(self, *args: Any, **kwargs: Any) -> Any:
        """Not available: the optimizer belongs to the DeepSpeed engine."""
        self._not_here(
            "wrap_optimizer", "give the optimizer to deepspeed.initialize() or the DeepSpeed config"
        )

    def wrap_lr_scheduler(self, *args: Any, **kwargs: Any) -> Any:
        """Not available: the LR scheduler belongs to the DeepSpeed engine."""
        self._not_here(
            "wrap_lr_scheduler",
            "give the scheduler to deepspeed.initialize() or the DeepSpeed config",
        )

    def wrap_scaler(self, scaler: Any) -> Any:
        """Not available: DeepSpeed scales losses itself (``fp16`` / ``bf16`` config)."""
        self._not_here("wrap_scaler", "configure fp16 / bf16 in the DeepSpeed config")

    def backward(self, *args: Any, **kwargs: Any) -> None:
        """Not available: call ``engine.backward(loss)``."""
        self._not_here("backward", "call engine.backward(loss)")

    def step_optimizer(self, *args: Any, **kwargs: Any) -> None:
        """Not available: call ``engine.step()``."""
        self._not_here("step_optimizer", "call engine.step()")

    def use_amp(self) -> None:
        """Not available: DeepSpeed handles mixed precision (``fp16`` / ``bf16`` config)."""
        self._not_here("use_amp", "configure fp16 / bf16 in the DeepSpeed config")

    def configure_apex_amp(self, *args: Any, **kwargs: Any) -> Any:
        """Not available: DeepSpeed handles mixed precision (``fp16`` / ``bf16`` config)."""
        self._not_here("configure_apex_amp", "configure fp16 / bf16 in the DeepSpeed config")
