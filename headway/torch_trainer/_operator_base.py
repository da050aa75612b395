"""The state and read-only views every ``TrainingOperator`` has (split from ``_operator.py``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from headway.torch_trainer.utils import TimerCollection


class OperatorBase:
    """Holds what ``TorchTrainer`` gives each operator and what ``register`` registered, and
    exposes it as RaySGD's properties. ``TrainingOperator`` is the class to subclass."""

    def __init__(
        self,
        config: dict[str, Any],
        world_rank: int,
        local_rank: int,
        world_size: int,
        is_distributed: bool,
        device: torch.device | None,
        use_gpu: bool,
        use_fp16: bool,
        use_tqdm: bool,
        wrap_ddp: bool,
        add_dist_sampler: bool,
        scheduler_step_freq: str | None,
    ) -> None:
        self._config = config
        self._world_rank = world_rank
        self._local_rank = local_rank
        self._world_size = world_size
        self._is_distributed = is_distributed
        self._device = device if device is not None else torch.device("cpu")
        self._use_gpu = use_gpu
        self._use_fp16 = use_fp16
        self._use_tqdm = use_tqdm
        self._wrap_ddp = wrap_ddp
        self._add_dist_sampler = add_dist_sampler
        self._scheduler_step_freq = scheduler_step_freq
        self.global_step = 0
        self.timers = TimerCollection()
        self.timers.disable()
        # fp16: float16 autocast + loss scaling on a GPU; bfloat16 autocast (no scaling needed)
        # on the CPU, where float16 matmuls are slow or missing.
        self._grad_scaler: torch.amp.GradScaler | None = None
        if use_fp16 and self._device.type == "cuda":
            self._grad_scaler = torch.amp.GradScaler("cuda")
        self._original_models: list[nn.Module] = []
        self._models: list[nn.Module] = []
        self._optimizers: list[torch.optim.Optimizer] = []
        self._schedulers: list[Any] = []
        self._registered_criterion: Any = None
        self._train_loader: Any = None
        self._validation_loader: Any = None
        self._model: Any = None
        self._optimizer: Any = None
        self._scheduler: Any = None
        self._criterion: Any = None

    @property
    def model(self) -> Any:
        """The model the default loops train: what you assigned to ``self.model``, else the
        first registered (wrapped) model; None before ``register``."""
        if self._model is not None:
            return self._model
        return self._models[0] if self._models else None

    @model.setter
    def model(self, value: Any) -> None:
        self._model = value

    @property
    def optimizer(self) -> Any:
        """Assigned ``self.optimizer``, else the first registered optimizer."""
        if self._optimizer is not None:
            return self._optimizer
        return self._optimizers[0] if self._optimizers else None

    @optimizer.setter
    def optimizer(self, value: Any) -> None:
        self._optimizer = value

    @property
    def criterion(self) -> Any:
        """Assigned ``self.criterion``, else the registered criterion."""
        return self._criterion if self._criterion is not None else self._registered_criterion

    @criterion.setter
    def criterion(self, value: Any) -> None:
        self._criterion = value

    @property
    def scheduler(self) -> Any:
        """Assigned ``self.scheduler``, else the first registered scheduler (or None)."""
        if self._scheduler is not None:
            return self._scheduler
        return self._schedulers[0] if self._schedulers else None

    @scheduler.setter
    def scheduler(self, value: Any) -> None:
        self._scheduler = value

    @property
    def models(self) -> list[nn.Module]:
        """Registered models, wrapped (DDP) as ``register`` returned them."""
        return list(self._models)

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        """Registered optimizers."""
        return list(self._optimizers)

    @property
    def schedulers(self) -> list[Any]:
        """Registered schedulers."""
        return list(self._schedulers)

    @property
    def train_loader(self) -> Any:
        """The registered training iterable (with its ``DistributedSampler``, if added)."""
        return self._train_loader

    @property
    def validation_loader(self) -> Any:
        """The registered validation iterable."""
        return self._validation_loader

    @property
    def device(self) -> torch.device:
        """Where models and batches go: ``cuda:LOCAL_RANK`` with ``use_gpu``, else the CPU."""
        return self._device

    @property
    def device_ids(self) -> list[int] | None:
        """``[device.index]`` on a GPU (for DDP), None on the CPU."""
        return [self._device.index or 0] if self._device.type == "cuda" else None

    @property
    def config(self) -> dict[str, Any]:
        """The config given to ``TorchTrainer`` (``BATCH_SIZE``: this worker's share)."""
        return self._config

    @property
    def world_rank(self) -> int:
        """This worker's global rank (0 when not distributed)."""
        return self._world_rank

    @property
    def local_rank(self) -> int:
        """This worker's rank on its host."""
        return self._local_rank

    @property
    def world_size(self) -> int:
        """Number of workers."""
        return self._world_size

    @property
    def use_gpu(self) -> bool:
        """Whether this worker trains on a CUDA device."""
        return self._use_gpu

    @property
    def use_fp16(self) -> bool:
        """Whether mixed precision is on (see ``autocast`` / ``grad_scaler``)."""
        return self._use_fp16

    @property
    def use_tqdm(self) -> bool:
        """Whether rank 0 shows a tqdm progress bar per training epoch."""
        return self._use_tqdm

    @property
    def scheduler_step_freq(self) -> str | None:
        """``"batch"``, ``"epoch"``, ``"manual"`` or None, as given to ``TorchTrainer``."""
        return self._scheduler_step_freq
