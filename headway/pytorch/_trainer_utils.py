"""Helpers of ``Trainer.fit`` shared with ``headway.pytorch.deepspeed``: opening a trial
context, wrapping the trial's data loaders and turning lengths into batches."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import headway
from headway import core
from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._dataloader import DataLoader, ResumableLoader, _PlainLoader
from headway.pytorch._trainer_config import TrainerConfig
from headway.pytorch._units import Batch, Epoch, TrainUnit

logger = logging.getLogger("headway.pytorch")

ContextT = TypeVar("ContextT")


@contextlib.contextmanager
def open_trial_context(
    make_context: Callable[..., ContextT],
    *,
    hparams: dict[str, Any] | None,
    exp_conf: dict[str, Any] | None,
    distributed: core.DistributedContext | None,
    checkpoint_storage: Any,
    trial_seed: int | None,
    local_trial_id: int,
    caller: str,
) -> Iterator[ContextT]:
    """What ``init()`` of ``headway.pytorch`` and ``headway.pytorch.deepspeed`` share.

    Resolves hparams, config, seed and ids (locally from the arguments, on the cluster from
    ``headway.get_cluster_info()``), opens the Core API context, seeds Python, NumPy and torch,
    and yields ``make_context(core_context, hparams=, exp_conf=, trainer_config=, trial_seed=,
    trial_id=, run_id=, experiment_id=)`` (``trainer_config``: the config's fields typed,
    ``headway.pytorch._trainer_config``).
    """
    info = headway.get_cluster_info()
    if info is None:
        hparams = dict(hparams or {})
        exp_conf = dict(exp_conf or {})
        trainer_config = TrainerConfig.from_local(exp_conf)
        if trial_seed is None:
            trial_seed = int(trainer_config.experiment_seed or 0)
        trial_id, run_id, experiment_id = local_trial_id, 0, None
    else:
        if hparams is not None or exp_conf is not None:
            logger.warning("%s: hparams / exp_conf are ignored on the cluster", caller)
        hparams = dict(info.trial.hparams)
        # The typed config for Headway's reads; Determined's dict for get_experiment_config().
        trainer_config = TrainerConfig.from_config(info.trial.config)
        exp_conf = info.trial._config
        trial_seed = info.trial.trial_seed
        trial_id, run_id = info.trial.trial_id, info.trial.run_id
        experiment_id = info.trial.experiment_id
    with contextlib.ExitStack() as stack:
        if distributed is None:
            distributed = stack.enter_context(launcher_process_group())
        core_context = stack.enter_context(
            core.init(distributed=distributed, checkpoint_storage=checkpoint_storage)
        )
        ckpt.seed_everything(trial_seed)
        yield make_context(
            core_context,
            hparams=hparams,
            exp_conf=exp_conf,
            trainer_config=trainer_config,
            trial_seed=trial_seed,
            trial_id=trial_id,
            run_id=run_id,
            experiment_id=experiment_id,
        )


def distributed_backend() -> str:
    """``"nccl"`` when this process sees a CUDA device, else ``"gloo"`` (as Determined picks)."""
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


@contextlib.contextmanager
def launcher_process_group() -> Iterator[core.DistributedContext | None]:
    """Join the ranks a launcher started: yield their ``DistributedContext``, or None when this
    process is not one of several ranks (``$WORLD_SIZE`` unset or 1).

    Initialises ``torch.distributed``'s default group from the launcher's environment
    (``env://``) unless it exists: NCCL with ``cuda:LOCAL_RANK`` as this rank's device on a GPU
    host (the worker's ``CUDA_VISIBLE_DEVICES`` lists only the run's GPUs), gloo on the CPU
    otherwise; a group created here is destroyed on exit. Determined's ``pytorch.init()`` does
    the same (``_initialize_distributed_backend``), so a trial never passes ``distributed=``.
    """
    distributed = core.DistributedContext.from_launcher()
    if distributed is None:
        yield None
        return
    import torch
    import torch.distributed as dist

    created = not dist.is_initialized()
    if created:
        backend = distributed_backend()
        if backend == "nccl":
            torch.cuda.set_device(distributed.local_rank % torch.cuda.device_count())
        dist.init_process_group(backend=backend)
    try:
        yield distributed
    finally:
        if created and dist.is_initialized():
            dist.destroy_process_group()


def resumable(
    loader: Any,
    where: str,
    *,
    seed: int,
    rank: int,
    size: int,
    training: bool,
    checks_disabled: bool = False,
) -> ResumableLoader | _PlainLoader:
    """The harness's view of the loader a trial's ``where()`` returned.

    A ``headway.pytorch.DataLoader`` is sharded over ``size`` slots and reshuffled
    reproducibly. Anything else is refused unless ``checks_disabled``
    (``context.experimental.disable_dataset_reproducibility_checks()``, Determined's rule): then
    any iterable is used as it is, resumed by skipping batches.

    Raises:
        TypeError: naming ``where`` and the switch, for another loader while checks are on,
            or for something that is not iterable.
    """
    if isinstance(loader, DataLoader):
        return ResumableLoader(loader, seed=seed, rank=rank, size=size, training=training)
    if not checks_disabled:
        raise TypeError(
            f"{where}() must return a headway.pytorch.DataLoader, got {type(loader).__name__}; "
            "call context.experimental.disable_dataset_reproducibility_checks() (DeepSpeedTrial: "
            "context.disable_dataset_reproducibility_checks()) in __init__ to return another "
            "loader (then sharding and shuffling are yours)"
        )
    if not hasattr(loader, "__iter__"):
        raise TypeError(f"{where}() returned a {type(loader).__name__}, which is not iterable")
    return _PlainLoader(loader)


def evaluates_full_dataset(trial: Any, base: Any) -> bool:
    """Whether ``trial`` validates with ``evaluate_full_dataset`` (overrides ``base``'s)."""
    return type(trial).evaluate_full_dataset is not base.evaluate_full_dataset


def batches_per_epoch(loader: ResumableLoader | _PlainLoader, conf: TrainerConfig, gbs: Any) -> int:
    if loader.has_length():
        n = len(loader)
        if n == 0:
            raise ValueError(
                "the training data loader has no batches (dataset smaller than one batch?)"
            )
        return n
    records = conf.records_per_epoch
    if records and gbs:
        return max(1, math.ceil(int(records) / int(gbs)))
    return 0  # unknown: Epoch units are refused in _to_batches


def to_batches(unit: TrainUnit | None, per_epoch: int, name: str) -> Batch | None:
    if unit is None:
        return None
    if not isinstance(unit, TrainUnit):
        raise ValueError(f"{name} must be headway.pytorch.Batch(...) or Epoch(...), got {unit!r}")
    if isinstance(unit, Epoch):
        if per_epoch <= 0:
            raise ValueError(
                f"{name}={unit!r}: the epoch length is unknown (data loader without len()); "
                "use Batch(...) or set records_per_epoch"
            )
        if isinstance(unit.value, int):
            return Batch(unit.value * per_epoch)
        return Batch([v * per_epoch for v in unit.value])
    return Batch(unit.value)
