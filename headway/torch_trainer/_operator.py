"""``TrainingOperator``: the user's training components and loops, one instance per worker.

Same public names and semantics as RaySGD's ``ray.util.sgd.torch.TrainingOperator`` (Ray 1.x):
subclass it, build the model, optimizer, loss and data in ``setup(config)``, hand them to
``self.register(...)`` / ``self.register_data(...)``, and optionally override ``train_epoch``,
``train_batch``, ``validate``, ``validate_batch``, ``state_dict`` and ``load_state_dict``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sized
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from headway.torch_trainer._creators import make_creator_operator
from headway.torch_trainer._data import with_distributed_sampler
from headway.torch_trainer._operator_base import OperatorBase
from headway.torch_trainer.utils import (
    NUM_SAMPLES,
    NUM_STEPS,
    SCHEDULER_STEP_BATCH,
    SCHEDULER_STEP_EPOCH,
    AverageMeterCollection,
)

logger = logging.getLogger("headway.torch_trainer")


def _as_list(items: Any) -> list[Any]:
    if isinstance(items, list | tuple):
        return list(items)
    return [items]


def _like(items: list[Any], original: Any) -> Any:
    """``items`` in the shape the user passed: a tuple, a list, or the single object."""
    if isinstance(original, tuple):
        return tuple(items)
    if isinstance(original, list):
        return items
    return items[0]


class TrainingOperator(OperatorBase):
    """Defines training and validation state and logic; ``TorchTrainer`` builds one per worker.

    Subclass it and override ``setup(config)``::

        class MyTrainingOperator(TrainingOperator):
            def setup(self, config):
                model = nn.Linear(1, 1)
                optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 1e-2))
                train_loader = DataLoader(LinearDataset(2, 5), batch_size=config[BATCH_SIZE])
                val_loader = DataLoader(LinearDataset(2, 5), batch_size=config[BATCH_SIZE])
                self.model, self.optimizer, self.criterion = self.register(
                    models=model, optimizers=optimizer, criterion=nn.MSELoss())
                self.register_data(train_loader=train_loader, validation_loader=val_loader)

    The default loops train ``self.model`` with ``self.optimizer`` and ``self.criterion`` on
    batches of ``(*features, target)``; override ``train_batch`` / ``validate_batch`` (per batch)
    or ``train_epoch`` / ``validate`` (per epoch) for anything else, e.g. several models. The
    operator's class must be importable by the worker processes (defined at module level; in a
    script run as ``python train.py``, keep the training under ``if __name__ == "__main__":``).

    Arguments (given by ``TorchTrainer``; build an operator yourself only in tests):
        config (dict): ``TorchTrainer``'s config, with ``BATCH_SIZE`` already this worker's share.
        world_rank (int): this worker's rank, ``0 <= world_rank < world_size``.
        local_rank (int): its rank on this host (its CUDA device index with ``use_gpu``).
        world_size (int): number of workers.
        is_distributed (bool): a process group spans the workers (``world_size > 1``): models
            are wrapped in ``DistributedDataParallel`` and data loaders get a
            ``DistributedSampler`` (unless ``wrap_ddp`` / ``add_dist_sampler`` are False).
        device (torch.device): where models, criterion and batches go; the CPU by default.
        use_gpu, use_fp16, use_tqdm, wrap_ddp, add_dist_sampler, scheduler_step_freq: as given
            to ``TorchTrainer``.

    Source: RaySGD's ``TrainingOperator`` (ray/util/sgd/torch/training_operator.py), with
    native mixed precision only (no apex).
    """

    def __init__(
        self,
        config: dict[str, Any],
        world_rank: int = 0,
        local_rank: int = 0,
        is_distributed: bool = False,
        device: torch.device | None = None,
        use_gpu: bool = False,
        use_fp16: bool = False,
        use_tqdm: bool = False,
        wrap_ddp: bool = False,
        add_dist_sampler: bool = False,
        scheduler_step_freq: str | None = None,
        world_size: int = 1,
    ) -> None:
        # Not meant to be overridden: put your set-up in ``setup``.
        super().__init__(
            config,
            world_rank,
            local_rank,
            world_size,
            is_distributed,
            device,
            use_gpu,
            use_fp16,
            use_tqdm,
            wrap_ddp,
            add_dist_sampler,
            scheduler_step_freq,
        )
        self.setup(config)

    @classmethod
    def from_creators(cls, *args: Any, **kwargs: Any) -> type[TrainingOperator]:
        """RaySGD's creator functions as an operator class: ``from_creators(model_creator,
        optimizer_creator, data_creator=None, loss_creator=None, scheduler_creator=None,
        serialize_data_creation=True)``; see ``_creators.make_creator_operator``."""
        operator_cls: type[TrainingOperator] = make_creator_operator(cls, *args, **kwargs)
        return operator_cls

    # -- to override ------------------------------------------------------------------------------

    def setup(self, config: dict[str, Any]) -> None:
        """Build the training components and call ``self.register`` / ``self.register_data``.

        Raises:
            NotImplementedError: when a subclass does not override it.
        """
        raise NotImplementedError("override TrainingOperator.setup(config) in your subclass")

    def register(
        self,
        *,
        models: nn.Module | Iterable[nn.Module],
        optimizers: torch.optim.Optimizer | Iterable[torch.optim.Optimizer],
        criterion: Any = None,
        schedulers: Any = None,
        ddp_args: Mapping[str, Any] | None = None,
        apex_args: Mapping[str, Any] | None = None,
    ) -> tuple[Any, ...]:
        """Move the model(s) and criterion to ``self.device``, wrap the model(s) in
        ``DistributedDataParallel`` (distributed and ``wrap_ddp``), and return them.

        Returns ``(models, optimizers[, criterion][, schedulers])`` in the shapes given (one
        object, a list or a tuple each); models come back wrapped. Mixed precision
        (``use_fp16``) needs no change to the components: the default loops run the forward
        pass under ``self.autocast()`` and scale the loss with ``self.grad_scaler`` on a GPU.

        Arguments:
            models: ``nn.Module`` or several.
            optimizers: ``torch.optim.Optimizer`` or several.
            criterion: the loss function (e.g. ``nn.MSELoss()``); optional with custom loops.
            schedulers: LR scheduler(s); requires ``TorchTrainer(scheduler_step_freq=...)``.
            ddp_args (dict): extra keyword arguments of ``DistributedDataParallel`` (e.g.
                ``find_unused_parameters=True``).
            apex_args: NVIDIA apex is not supported; must be None.

        Raises:
            TypeError: a model is not an ``nn.Module``, or ``ddp_args`` is not a dict.
            ValueError: ``apex_args`` given, or schedulers without ``scheduler_step_freq``.
        """
        if apex_args is not None:
            raise ValueError(
                "apex_args: NVIDIA apex is not supported; use_fp16=True uses torch.amp "
                "(float16 with loss scaling on a GPU, bfloat16 on the CPU)"
            )
        if ddp_args is not None and not isinstance(ddp_args, Mapping):
            raise TypeError(f"ddp_args must be a dict, not {type(ddp_args).__name__}")
        model_list = _as_list(models)
        for model in model_list:
            if not isinstance(model, nn.Module):
                raise TypeError(f"models: {type(model).__name__} is not a torch.nn.Module")
        self._original_models = [model.to(self._device) for model in model_list]
        self._optimizers = _as_list(optimizers)
        if self._wrap_ddp and self._is_distributed:
            device_ids = self.device_ids
            self._models = [
                DistributedDataParallel(model, device_ids=device_ids, **dict(ddp_args or {}))
                for model in self._original_models
            ]
        else:
            self._models = list(self._original_models)
        out: list[Any] = [_like(self._models, models), _like(self._optimizers, optimizers)]
        if criterion is not None:
            if isinstance(criterion, nn.Module):
                criterion = criterion.to(self._device)
            self._registered_criterion = criterion
            out.append(criterion)
        if schedulers is not None:
            if self._scheduler_step_freq is None:
                raise ValueError(
                    "schedulers: registering schedulers needs TorchTrainer(scheduler_step_freq="
                    "'batch' | 'epoch' | 'manual')"
                )
            self._schedulers = _as_list(schedulers)
            out.append(_like(self._schedulers, schedulers))
        return tuple(out)

    def register_data(self, *, train_loader: Any = None, validation_loader: Any = None) -> None:
        """Register the iterables ``train_epoch`` and ``validate`` iterate over.

        With several workers and ``add_dist_sampler`` (the default), a map-style ``DataLoader``
        is rebuilt with a ``DistributedSampler`` so each worker reads its own shard (shuffled
        anew each epoch for training; in order for validation). Other iterables are used as
        given: shard them yourself with ``self.world_rank`` / ``self.world_size``.
        """
        if self._is_distributed and self._add_dist_sampler:
            train_loader = with_distributed_sampler(train_loader, shuffle=True)
            validation_loader = with_distributed_sampler(validation_loader, shuffle=False)
        self._train_loader = train_loader
        self._validation_loader = validation_loader

    def train_epoch(self, iterator: Iterable[Any], info: dict[str, Any]) -> dict[str, Any]:
        """One pass over ``iterator``: ``train_batch`` per batch, metrics averaged over batches
        (weighted by each batch's ``num_samples``) with ``AverageMeterCollection``; steps the
        scheduler per batch or per epoch as ``scheduler_step_freq`` says.

        Returns:
            ``{"batch_count", "num_samples", "train_loss", "last_train_loss", ...}`` by default.
        """
        model = self._require(self.model, "model", "training")
        scheduler = self.scheduler
        meters = AverageMeterCollection()
        progress = self._progress_bar(iterator, info)
        model.train()
        for batch_idx, batch in enumerate(iterator):
            batch_info = {"batch_idx": batch_idx, "global_step": self.global_step, **info}
            metrics = self.train_batch(batch, batch_info=batch_info)
            if scheduler is not None and self._scheduler_step_freq == SCHEDULER_STEP_BATCH:
                scheduler.step()
            meters.update(metrics, n=metrics.pop(NUM_SAMPLES, 1))
            self.global_step += 1
            if progress is not None:
                progress.update(1)
                if "train_loss" in metrics:
                    progress.set_postfix(loss=metrics["train_loss"])
        if progress is not None:
            progress.close()
        if scheduler is not None and self._scheduler_step_freq == SCHEDULER_STEP_EPOCH:
            scheduler.step()
        return meters.summary()

    def train_batch(self, batch: Any, batch_info: dict[str, Any]) -> dict[str, Any]:
        """Forward, backward and optimizer step on one ``(*features, target)`` batch.

        Returns:
            ``{"train_loss": float, "num_samples": int}``; ``num_samples`` (the first feature's
            length) weighs the batch in ``train_epoch``'s averages.
        """
        model = self._require(self.model, "model", "training")
        optimizer = self._require(self.optimizer, "optimizer", "training")
        criterion = self._require(self.criterion, "criterion", "training")
        features, target = self._features_and_target(batch)
        with self.timers.record("fwd"), self.autocast():
            output = model(*features)
            loss = criterion(output, target)
        with self.timers.record("grad"):
            optimizer.zero_grad()
            if self._grad_scaler is not None:
                self._grad_scaler.scale(loss).backward()
            else:
                loss.backward()
        with self.timers.record("apply"):
            if self._grad_scaler is not None:
                self._grad_scaler.step(optimizer)
                self._grad_scaler.update()
            else:
                optimizer.step()
        return {"train_loss": loss.item(), NUM_SAMPLES: features[0].size(0)}

    def validate(self, val_iterator: Iterable[Any], info: dict[str, Any]) -> dict[str, Any]:
        """``validate_batch`` over ``val_iterator`` under ``model.eval()`` and ``no_grad``,
        averaged over batches weighted by ``num_samples``.

        Returns:
            ``{"batch_count", "num_samples", "val_loss", "last_val_loss", "val_accuracy",
            "last_val_accuracy"}`` by default.
        """
        model = self._require(self.model, "model", "validation")
        meters = AverageMeterCollection()
        model.eval()
        with torch.no_grad():
            for batch_idx, batch in enumerate(val_iterator):
                batch_info = {"batch_idx": batch_idx, **info}
                metrics = self.validate_batch(batch, batch_info)
                meters.update(metrics, n=metrics.pop(NUM_SAMPLES, 1))
        return meters.summary()

    def validate_batch(self, batch: Any, batch_info: dict[str, Any]) -> dict[str, Any]:
        """Loss and accuracy (arg-max of the output's dimension 1 against the target) of one
        ``(*features, target)`` batch.

        Returns:
            ``{"val_loss": float, "val_accuracy": float, "num_samples": int}``.
        """
        model = self._require(self.model, "model", "validation")
        criterion = self._require(self.criterion, "criterion", "validation")
        features, target = self._features_and_target(batch)
        with self.timers.record("eval_fwd"), self.autocast():
            output = model(*features)
            loss = criterion(output, target)
            _, predicted = torch.max(output.data, 1)
        num_samples = target.size(0)
        num_correct = (predicted == target).sum().item()
        return {
            "val_loss": loss.item(),
            "val_accuracy": num_correct / num_samples,
            NUM_SAMPLES: num_samples,
        }

    def state_dict(self) -> Any:
        """Extra state of your operator to save with the registered components (which are
        saved anyway); None by default. Make it CPU-loadable if the driver has no GPU."""
        return None

    def load_state_dict(self, state_dict: Any) -> None:
        """Load what ``state_dict()`` returned (after the registered components are loaded)."""

    # -- helpers for custom loops ---------------------------------------------------------------

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The mixed-precision context of ``use_fp16`` for forward passes: float16 autocast on
        a GPU, bfloat16 on the CPU; a no-op context without ``use_fp16``."""
        if not self._use_fp16:
            return contextlib.nullcontext()
        if self._device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.float16)
        return torch.autocast("cpu", dtype=torch.bfloat16)

    @property
    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """The ``torch.amp.GradScaler`` of ``use_fp16`` on a GPU (None otherwise): in custom
        loops, ``grad_scaler.scale(loss).backward()``, ``grad_scaler.step(opt)``,
        ``grad_scaler.update()``."""
        return self._grad_scaler

    def _features_and_target(self, batch: Any) -> tuple[list[Any], Any]:
        """A ``(*features, target)`` batch of the default loops, on ``self.device``."""
        *features, target = batch
        return [self._to_device(feature) for feature in features], self._to_device(target)

    def _to_device(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.device != self._device:
            return value.to(self._device, non_blocking=True)
        return value

    def _require(self, value: Any, name: str, loop: str) -> Any:
        if value is None:
            raise RuntimeError(
                f"no {name}: register one in setup (self.register(...)) or set self.{name}, "
                f"or override the {loop} methods to implement a custom {loop} loop"
            )
        return value

    def _progress_bar(self, iterator: Iterable[Any], info: dict[str, Any]) -> Any:
        if not (self._use_tqdm and self._world_rank == 0):
            return None
        from tqdm import tqdm

        total = info.get(NUM_STEPS)
        if total is None and isinstance(iterator, Sized):
            total = len(iterator)
        elif total is None and isinstance(self._train_loader, Sized):
            total = len(self._train_loader)  # the worker's one-pass generator over it
        desc = f"{info['epoch_idx'] + 1}e" if "epoch_idx" in info else ""
        return tqdm(total=total, desc=desc, unit="batch", leave=False)

    # -- the runner's state (one definition for the worker and the driver) ----------------------

    def _full_state(self, epochs: int) -> dict[str, Any]:
        state: dict[str, Any] = {
            "epoch": epochs,
            "global_step": self.global_step,
            "operator": self.state_dict(),
            "models": [model.state_dict() for model in self._original_models],
            "optimizers": [opt.state_dict() for opt in self._optimizers],
            "schedulers": [scheduler.state_dict() for scheduler in self._schedulers],
        }
        if self._grad_scaler is not None:
            state["amp"] = self._grad_scaler.state_dict()
        return state

    def _load_full_state(self, state: Mapping[str, Any]) -> int:
        """Load ``_full_state``'s dict; returns its epoch count."""
        for model, model_state in zip(self._original_models, state["models"], strict=True):
            model.load_state_dict(model_state)
        for opt, opt_state in zip(self._optimizers, state["optimizers"], strict=True):
            opt.load_state_dict(opt_state)
        for scheduler, scheduler_state in zip(
            self._schedulers, state.get("schedulers", []), strict=True
        ):
            scheduler.load_state_dict(scheduler_state)
        if self._grad_scaler is not None and "amp" in state:
            self._grad_scaler.load_state_dict(state["amp"])
        self.global_step = int(state.get("global_step", 0))
        self.load_state_dict(state.get("operator"))
        return int(state["epoch"])
