"""Argument checks, batch-size division and result averaging of ``TorchTrainer`` (pure functions)."""

from __future__ import annotations

import logging
import math
import numbers
import pickle
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from headway.torch_trainer._operator import TrainingOperator
from headway.torch_trainer.utils import BATCH_SIZE, NUM_SAMPLES, VALID_SCHEDULER_STEP

logger = logging.getLogger("headway.torch_trainer")

# RaySGD arguments that cannot work here: name -> why (raised as ValueError when given).
UNSUPPORTED = {
    "num_cpus_per_worker": "Ray resource requests need a Ray cluster (ray.init() or RAY_ADDRESS); "
    "without one each worker gets $HEADWAY_THREADS_PER_SLOT threads on a Headway cluster",
    "resources_per_worker": "Ray resource requests need a Ray cluster (ray.init() or RAY_ADDRESS)",
    "use_local": "workers always run in their own processes; get_local_operator() returns a "
    "copy in the driver",
    "num_replicas": "deprecated in RaySGD; use num_workers",
    "batch_size": "deprecated in RaySGD; use config={BATCH_SIZE: N} (global) or your own key",
    "model_creator": "creator functions are deprecated in RaySGD; define a TrainingOperator "
    "subclass and register the components in setup()",
    "data_creator": "creator functions are deprecated; use TrainingOperator.register_data()",
    "optimizer_creator": "creator functions are deprecated; use TrainingOperator.register()",
    "scheduler_creator": "creator functions are deprecated; use TrainingOperator.register()",
    "loss_creator": "creator functions are deprecated; use TrainingOperator.register()",
    "serialize_data_creation": "deprecated in RaySGD (it was ignored there); lock your data "
    "download in setup() if needed",
    "data_loader_args": "deprecated in RaySGD; build the DataLoader in setup()",
    "apex_args": "NVIDIA apex is not supported; use_fp16=True uses torch.amp",
}


def reject_unsupported(given: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first RaySGD-only argument that was passed (not None)."""
    for name, why in UNSUPPORTED.items():
        if given.get(name) is not None:
            raise ValueError(f"TorchTrainer({name}=...) is not supported: {why}")


def check_picklable(name: str, value: Any) -> None:
    """Workers receive ``value`` by pickle; raise ``TypeError`` naming ``name`` if it cannot be
    (a lambda or a class defined inside a function: define it at module level)."""
    try:
        pickle.dumps(value)
    except Exception as exc:
        raise TypeError(
            f"{name} must be picklable to reach the worker processes (define it at module "
            f"level, not inside a function or as a lambda): {exc}"
        ) from exc


def check_options(
    *,
    training_operator_cls: Any,
    config: Any,
    num_workers: Any,
    use_gpu: Any,
    backend: Any,
    use_fp16: Any,
    scheduler_step_freq: Any,
    timeout_s: Any,
    initialization_hook: Any,
    cluster_gpus: float | None = None,
) -> tuple[bool, str]:
    """Check ``TorchTrainer``'s arguments; returns the resolved ``(use_gpu, backend)``.

    ``cluster_gpus``: on Ray, the cluster's GPUs (``use_gpu="auto"`` means "the cluster has
    some", and Ray, not this host, checks that each worker gets one); None on this host.

    Raises:
        TypeError / ValueError: naming the argument that is wrong.
    """
    if not (
        isinstance(training_operator_cls, type)
        and issubclass(training_operator_cls, TrainingOperator)
    ):
        raise TypeError(
            "training_operator_cls must be a subclass of headway.torch_trainer.TrainingOperator, "
            f"not {training_operator_cls!r}"
        )
    check_picklable("training_operator_cls", training_operator_cls)
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"config must be a dict, not {type(config).__name__}")
    check_picklable("config", config)
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be an integer >= 1, not {num_workers!r}")
    if initialization_hook is not None:
        if not callable(initialization_hook):
            raise TypeError("initialization_hook must be callable")
        check_picklable("initialization_hook", initialization_hook)
    use_gpu, backend = _resolve_device(use_gpu, backend, num_workers, cluster_gpus)
    if use_fp16 == "apex":
        raise ValueError("use_fp16='apex': NVIDIA apex is not supported; use use_fp16=True")
    if not isinstance(use_fp16, bool):
        raise ValueError(f"use_fp16 must be True or False, not {use_fp16!r}")
    if scheduler_step_freq is not None and scheduler_step_freq not in VALID_SCHEDULER_STEP:
        raise ValueError(
            f"scheduler_step_freq must be one of {VALID_SCHEDULER_STEP} or None, "
            f"not {scheduler_step_freq!r}"
        )
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    return use_gpu, backend


def _resolve_device(
    use_gpu: Any, backend: Any, num_workers: int, cluster_gpus: float | None
) -> tuple[bool, str]:
    """``use_gpu`` and ``backend`` checked, with ``"auto"`` resolved: ``(use_gpu, backend)``."""
    if use_gpu == "auto":
        use_gpu = torch.cuda.is_available() if cluster_gpus is None else cluster_gpus >= 1
    elif not isinstance(use_gpu, bool):
        raise ValueError(f"use_gpu must be True, False or 'auto', not {use_gpu!r}")
    elif use_gpu and cluster_gpus is None and torch.cuda.device_count() < num_workers:
        raise ValueError(
            f"use_gpu=True needs one CUDA device per worker: {num_workers} workers, "
            f"{torch.cuda.device_count()} devices visible"
        )
    if backend == "auto":
        backend = "nccl" if use_gpu else "gloo"
    elif backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', not {backend!r}")
    elif backend == "nccl" and not use_gpu:
        raise ValueError("backend='nccl' needs use_gpu=True (NCCL runs on CUDA devices)")
    return use_gpu, backend


def check_num_steps(num_steps: Any) -> None:
    if num_steps is not None and (
        isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1
    ):
        raise ValueError(f"num_steps must be None or an integer >= 1, not {num_steps!r}")


def check_info(info: Any) -> None:
    if info is not None and not isinstance(info, dict):
        raise TypeError(f"info must be a dict or None, not {type(info).__name__}")
    check_picklable("info", info)


def split_batch_size(config: dict[str, Any], num_workers: int) -> dict[str, Any]:
    """The config each worker gets: ``config[BATCH_SIZE]`` (the global batch size) divided by
    ``num_workers``, rounded down. As RaySGD, a global size that does not divide evenly is
    lowered to ``per_worker * num_workers`` in ``config`` itself, with a warning.

    Raises:
        ValueError: ``BATCH_SIZE`` is not an integer, or smaller than ``num_workers``.
    """
    worker_config = dict(config)
    if BATCH_SIZE not in config:
        return worker_config
    batch_size = config[BATCH_SIZE]
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise ValueError(f"config[BATCH_SIZE] must be an integer, not {batch_size!r}")
    per_worker = batch_size // num_workers
    if per_worker < 1:
        raise ValueError(
            f"config[BATCH_SIZE]={batch_size} is smaller than num_workers={num_workers}"
        )
    if batch_size % num_workers:
        logger.warning(
            "Changing batch size from %d to %d to evenly distribute batches across %d workers.",
            batch_size,
            per_worker * num_workers,
            num_workers,
        )
        config[BATCH_SIZE] = per_worker * num_workers
    worker_config[BATCH_SIZE] = per_worker
    return worker_config


def reduce_stats(worker_stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Average per-worker results as RaySGD does: ``num_samples`` summed, other numbers
    averaged over the workers that have them (NaN ignored), anything else (e.g. ``profile``)
    taken from worker 0."""
    stats: dict[str, Any] = {}
    if any(NUM_SAMPLES in s for s in worker_stats):
        stats[NUM_SAMPLES] = sum(s.get(NUM_SAMPLES, 0) for s in worker_stats)
    for key, first in worker_stats[0].items():
        if key == NUM_SAMPLES:
            continue
        if isinstance(first, numbers.Number) and not isinstance(first, complex):
            values = [float(s[key]) for s in worker_stats if key in s]
            values = [v for v in values if not math.isnan(v)]
            stats[key] = sum(values) / len(values) if values else math.nan
        else:
            stats[key] = first
    return stats


def check_ray_resources(num_cpus_per_worker: Any, resources_per_worker: Any) -> None:
    """Check the Ray-only resource arguments (``ValueError`` / ``TypeError`` naming them)."""
    if (
        isinstance(num_cpus_per_worker, bool)
        or not isinstance(num_cpus_per_worker, int | float)
        or num_cpus_per_worker <= 0
    ):
        raise ValueError(f"num_cpus_per_worker must be a number > 0, not {num_cpus_per_worker!r}")
    if resources_per_worker is None:
        return
    if not isinstance(resources_per_worker, dict):
        raise TypeError(
            f"resources_per_worker must be a dict, not {type(resources_per_worker).__name__}"
        )
    for name, amount in resources_per_worker.items():
        if name in ("CPU", "GPU"):
            raise ValueError(
                f"resources_per_worker[{name!r}]: use num_cpus_per_worker / use_gpu instead"
            )
        if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
            raise ValueError(
                f"resources_per_worker[{name!r}] must be a number >= 0, not {amount!r}"
            )
