"""``TorchTrainer``: RaySGD's driver API over worker processes on this host or Ray actors.

With a Ray cluster reachable (``ray.init()`` done, or ``RAY_ADDRESS`` set) the workers are Ray
actors across its nodes (``_ray_group.py``); otherwise processes on this host started by
``torch.distributed.elastic``. Either way the driver and the workers run the same code.

The driver (the process that builds the ``TorchTrainer``) owns a TCPStore and a temporary state
directory, and starts ``num_workers`` persistent worker processes with ``elastic_launch``
(``_group.py``). Each ``train()`` / ``validate()`` is one command answered by every worker; after
each ``train()`` rank 0 writes the state to a new file, which becomes the *last good state* once
every worker answered. When a worker dies, the agent stops the group; ``train()`` launches a new
group that loads the last good state and runs the epoch again (up to ``max_retries`` times).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import weakref
from collections.abc import Callable
from typing import Any

import torch

from headway._info import get_cluster_info
from headway.launch.torch_distributed import LaunchError, plan_from_env
from headway.torch_trainer import _args
from headway.torch_trainer._driver import Driver
from headway.torch_trainer._exit import at_exit
from headway.torch_trainer._operator import TrainingOperator
from headway.torch_trainer._ray_env import cluster_gpus, ray_reachable

logger = logging.getLogger("headway.torch_trainer")


class TorchTrainer:
    """Train a ``TrainingOperator`` data-parallel on ``num_workers`` worker processes.

    Same arguments and methods as RaySGD's ``ray.util.sgd.TorchTrainer``::

        trainer = TorchTrainer(
            training_operator_cls=MyTrainingOperator,
            num_workers=2,
            config={"lr": 1e-2, BATCH_SIZE: 64},  # 32 per worker
        )
        for _ in range(5):
            stats = trainer.train()  # one epoch on every worker, averaged across workers
        print(trainer.validate())
        model = trainer.get_model()
        trainer.shutdown()

    With a Ray cluster reachable (``ray.init()`` called first, or ``RAY_ADDRESS`` set) the
    workers are Ray actors spread over its nodes; otherwise they are processes on this host
    (one per CPU slot, or per GPU with ``use_gpu``). Each has its own
    ``TrainingOperator`` built once and kept between calls; they join a ``torch.distributed``
    process group (``world_size = num_workers``) and the model is wrapped in
    ``DistributedDataParallel``.

    Arguments:
        training_operator_cls (type): your ``TrainingOperator`` subclass (module level).
        initialization_hook (callable): called with no argument first in every worker process
            (e.g. to set environment variables); must be picklable.
        config (dict): passed to ``setup``; ``config[BATCH_SIZE]`` is the global batch size,
            divided among the workers (each sees its share under the same key).
        num_workers (int): worker processes, >= 1. On a Headway cluster at most the trial's
            slots (``resources.slots_per_trial``). On Ray: the most workers; fewer after a node
            was lost, until room for more returns (``num_workers_now``).
        use_gpu (bool | "auto"): one CUDA device per worker (``cuda:LOCAL_RANK``); "auto": when
            CUDA is available (on Ray: when the cluster has GPUs).
        backend ("auto" | "gloo" | "nccl"): the process group's backend; "auto": NCCL with
            ``use_gpu``, else gloo.
        wrap_ddp (bool): wrap registered models in ``DistributedDataParallel`` (default True).
        timeout_s (float): the process group's collective timeout, seconds (default 1800).
        use_fp16 (bool): mixed precision with ``torch.amp``: float16 + loss scaling on GPUs,
            bfloat16 autocast on the CPU.
        use_tqdm (bool): a tqdm progress bar of each training epoch on rank 0.
        add_dist_sampler (bool): give registered ``DataLoader``s a ``DistributedSampler``
            (default True).
        scheduler_step_freq ("batch" | "epoch" | "manual" | None): when the default
            ``train_epoch`` steps registered schedulers; required to register schedulers.
        num_cpus_per_worker (float): on Ray, each worker actor's CPUs (default 1).
        resources_per_worker (dict): on Ray, each worker actor's custom resources.
        use_local, apex_args and RaySGD's deprecated arguments
            (num_replicas, batch_size, *_creator, serialize_data_creation, data_loader_args):
            not supported, nor the Ray-only ones off Ray; passing one raises ``ValueError``
            naming it.

    Raises:
        TypeError / ValueError: naming the argument that is wrong or unsupported.
        RuntimeError: the workers could not start (with the failing worker's traceback).

    Source: RaySGD's ``TorchTrainer`` (ray/util/sgd/torch/torch_trainer.py, Ray 1.x); see
    docs/torch-trainer.md for what differs.
    """

    def __init__(
        self,
        *,
        training_operator_cls: type[TrainingOperator],
        initialization_hook: Callable[[], Any] | None = None,
        config: dict[str, Any] | None = None,
        num_workers: int = 1,
        use_gpu: bool | str = "auto",
        backend: str = "auto",
        wrap_ddp: bool = True,
        timeout_s: float = 1800,
        use_fp16: bool = False,
        use_tqdm: bool = False,
        add_dist_sampler: bool = True,
        scheduler_step_freq: str | None = None,
        num_cpus_per_worker: Any = None,
        resources_per_worker: Any = None,
        use_local: Any = None,
        num_replicas: Any = None,
        batch_size: Any = None,
        model_creator: Any = None,
        data_creator: Any = None,
        optimizer_creator: Any = None,
        scheduler_creator: Any = None,
        loss_creator: Any = None,
        serialize_data_creation: Any = None,
        data_loader_args: Any = None,
        apex_args: Any = None,
    ) -> None:
        self.on_ray = ray_reachable()
        unsupported = {
            "num_cpus_per_worker": None if self.on_ray else num_cpus_per_worker,
            "resources_per_worker": None if self.on_ray else resources_per_worker,
            "use_local": use_local or None,
            "num_replicas": num_replicas,
            "batch_size": batch_size,
            "model_creator": model_creator,
            "data_creator": data_creator,
            "optimizer_creator": optimizer_creator,
            "scheduler_creator": scheduler_creator,
            "loss_creator": loss_creator,
            "serialize_data_creation": serialize_data_creation,
            "data_loader_args": data_loader_args,
            "apex_args": apex_args,
        }
        _args.reject_unsupported(unsupported)
        self.use_gpu, self.backend = _args.check_options(
            training_operator_cls=training_operator_cls,
            config=config,
            num_workers=num_workers,
            use_gpu=use_gpu,
            backend=backend,
            use_fp16=use_fp16,
            scheduler_step_freq=scheduler_step_freq,
            timeout_s=timeout_s,
            initialization_hook=initialization_hook,
            cluster_gpus=cluster_gpus() if self.on_ray else None,
        )
        launcher = None
        if self.on_ray:
            from headway.torch_trainer._ray_group import RayLauncher

            num_cpus = 1 if num_cpus_per_worker is None else num_cpus_per_worker
            _args.check_ray_resources(num_cpus, resources_per_worker)
            launcher = RayLauncher(num_workers, num_cpus, self.use_gpu, resources_per_worker)
        for name, flag in (
            ("wrap_ddp", wrap_ddp),
            ("use_tqdm", use_tqdm),
            ("add_dist_sampler", add_dist_sampler),
        ):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be True or False, not {flag!r}")
        # On Ray each actor's threads follow its CPUs (Ray sets OMP_NUM_THREADS).
        threads = None if self.on_ray else self._threads_per_worker(num_workers)
        self.training_operator_cls = training_operator_cls
        self.config: dict[str, Any] = {} if config is None else config
        self.num_workers = num_workers
        self._local_operator: TrainingOperator | None = None
        _args.split_batch_size(self.config, num_workers)  # checks it; lowers it with a warning
        self._driver = Driver(
            num_workers,
            launcher=launcher,
            operator_cls=training_operator_cls,
            config=self.config,
            threads=threads,
            initialization_hook=initialization_hook,
            backend=self.backend,
            use_gpu=self.use_gpu,
            use_fp16=use_fp16,
            use_tqdm=use_tqdm,
            wrap_ddp=wrap_ddp,
            add_dist_sampler=add_dist_sampler,
            scheduler_step_freq=scheduler_step_freq,
            timeout_s=float(timeout_s),
        )
        # Workers must not outlive a driver that ends without shutdown() (it raised, or forgot).
        at_exit(functools.partial(_end_at_exit, weakref.ref(self)))  # weak: no leak

    # -- workers --------------------------------------------------------------------------------

    @staticmethod
    def _threads_per_worker(num_workers: int) -> int | None:
        # On a Headway cluster the worker's environment says how many slots (and threads per
        # slot) this trial holds; the same variables headway.launch.torch_distributed reads.
        if get_cluster_info() is None:
            return None
        try:
            plan = plan_from_env()
        except LaunchError as exc:
            raise ValueError(f"TorchTrainer on a Headway cluster: {exc}") from exc
        if num_workers > plan.nproc_per_node:
            raise ValueError(
                f"num_workers={num_workers} exceeds this trial's {plan.nproc_per_node} slots "
                "(resources.slots_per_trial)"
            )
        return plan.threads_per_slot

    # -- RaySGD's API ---------------------------------------------------------------------------

    def train(
        self,
        num_steps: int | None = None,
        profile: bool = False,
        reduce_results: bool = True,
        max_retries: int = 3,
        info: dict[str, Any] | None = None,
        dataset: Any = None,
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """Run one training epoch on every worker (``TrainingOperator.train_epoch``).

        Arguments:
            num_steps (int): train on exactly this many batches per worker instead of one pass
                (the loader starts over when it runs out).
            profile (bool): add ``"profile"``: mean seconds of ``train_epoch`` and, in the
                default loop, of ``fwd`` / ``grad`` / ``apply`` per batch (worker 0's).
            reduce_results (bool): average the workers' results (``num_samples`` summed);
                False returns the list of each worker's dict, by rank.
            max_retries (int): when a worker dies (or is killed), start a new group from the
                state after the last successful ``train()`` and run this epoch again, at most
                this many times (default 3, as RaySGD).
            info (dict): passed to ``train_epoch`` (with ``epoch_idx`` and RaySGD's keys).
            dataset: RaySGD's ``Dataset`` is not supported; must be None.

        Returns:
            ``{"num_samples", "epoch", "batch_count", "train_loss", "last_train_loss", ...}``
            (averaged) or a list of such dicts (``reduce_results=False``).

        Raises:
            ValueError / TypeError: naming a bad argument.
            RuntimeError: a worker raised (its traceback in the message; not retried), or the
                group failed more than ``max_retries`` times.
        """
        if dataset is not None:
            raise ValueError("train(dataset=...): RaySGD Datasets are not supported")
        _args.check_num_steps(num_steps)
        _args.check_info(info)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, not {max_retries!r}")
        self._driver.grow()  # on Ray, after a resize: back to num_workers once they fit
        path = self._driver.new_path()
        stats = self._driver.run(
            "train",
            retries=max_retries,
            num_steps=num_steps,
            profile=bool(profile),
            info=info,
            save_to=path,
        )
        self._driver.promote(path)
        return _args.reduce_stats(stats) if reduce_results else stats

    def validate(
        self,
        num_steps: int | None = None,
        profile: bool = False,
        reduce_results: bool = True,
        info: dict[str, Any] | None = None,
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """Evaluate on every worker's validation shard (``TrainingOperator.validate``).

        Arguments are those of ``train`` (no retries: a group failure raises, and the next
        call starts a new group from the last good state).

        Returns:
            ``{"num_samples", "batch_count", "val_loss", "last_val_loss", "val_accuracy",
            "last_val_accuracy"}`` averaged over workers, or the per-worker list.
        """
        _args.check_num_steps(num_steps)
        _args.check_info(info)
        stats = self._driver.run("validate", num_steps=num_steps, profile=bool(profile), info=info)
        return _args.reduce_stats(stats) if reduce_results else stats

    def update_scheduler(self, metric: Any) -> None:
        """Call ``scheduler.step(metric)`` on every registered scheduler of every worker
        (e.g. ``ReduceLROnPlateau`` with ``scheduler_step_freq="manual"``)."""
        self._driver.run("update_scheduler", metric=metric)

    def apply_all_workers(self, fn: Callable[[], Any]) -> list[Any]:
        """Run ``fn()`` in every worker process; returns the results by rank. ``fn`` must be
        picklable (a module-level function)."""
        _args.check_picklable("fn", fn)
        return self._driver.run("apply", fn=fn)

    def apply_all_operators(self, fn: Callable[[TrainingOperator], Any]) -> list[Any]:
        """Run ``fn(operator)`` on every worker's operator; returns the results by rank."""
        _args.check_picklable("fn", fn)
        return self._driver.run("apply_operator", fn=fn)

    def state_dict(self) -> dict[str, Any]:
        """The workers' current state (rank 0's): ``epoch``, ``models``, ``optimizers``,
        ``schedulers``, ``operator`` (your ``TrainingOperator.state_dict()``), ``amp``."""
        state: dict[str, Any] = torch.load(
            self._driver.snapshot(), map_location="cpu", weights_only=False
        )
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load ``state_dict`` (from ``state_dict()`` or ``save``) into every worker."""
        path = self._driver.new_path()
        torch.save(state_dict, path)
        self._driver.load(path)

    def save(self, checkpoint: str | os.PathLike[str]) -> str | os.PathLike[str]:
        """Write the trainer's state (``state_dict()``) to the file ``checkpoint``; returns it."""
        shutil.copyfile(self._driver.snapshot(), checkpoint)
        return checkpoint

    def load(self, checkpoint: str | os.PathLike[str]) -> None:
        """Load the file written by ``save`` into every worker (a pickle: load only your own
        checkpoints)."""
        path = self._driver.new_path()
        shutil.copyfile(checkpoint, path)
        self._driver.load(path)

    def get_local_operator(self) -> TrainingOperator:
        """A ``TrainingOperator`` in this (driver) process holding the workers' current state.

        Built once with ``setup(config)`` (rank 0 of 1, on the CPU, no DDP) and refreshed with
        the workers' state at each call. It is a copy: changing it does not change the workers.
        """
        path = self._driver.snapshot()
        spec = self._driver.spec
        if self._local_operator is None:
            self._local_operator = self.training_operator_cls(
                dict(spec.config),
                world_rank=0,
                local_rank=0,
                world_size=1,
                is_distributed=False,
                device=torch.device("cpu"),
                use_fp16=False,
                scheduler_step_freq=spec.scheduler_step_freq,
            )
        state = torch.load(path, map_location="cpu", weights_only=False)
        self._local_operator._load_full_state(state)
        return self._local_operator

    def get_model(self, to_cpu: bool = True) -> Any:
        """The trained model (or the list of models), unwrapped from DDP, on the CPU, in this
        process (see ``get_local_operator``). ``to_cpu``: accepted for RaySGD compatibility;
        the copy is always on the CPU."""
        models = self.get_local_operator()._original_models
        return models[0] if len(models) == 1 else list(models)

    @classmethod
    def as_trainable(
        cls, *args: Any, override_tune_step: Callable[..., Any] | None = None, **kwargs: Any
    ) -> type:
        """A Ray Tune ``Trainable`` class that trains a ``TorchTrainer(*args, **kwargs)``.

        Each trial builds the trainer with ``config`` updated by the trial's config (its
        workers are Ray actors in the trial's placement group: one CPU for the trainable plus
        one bundle per worker); each Tune step is ``train()`` then ``validate()``, their
        results merged (or ``override_tune_step(trainer, iteration)``'s dict). Checkpoints
        are ``trainer.save``. Needs Ray Tune (``pip install 'headway[ray]'``).
        """
        from headway.torch_trainer._tune import make_trainable

        return make_trainable(cls, args, kwargs, override_tune_step)

    @property
    def num_workers_now(self) -> int:
        """Workers in the current group: ``num_workers``, or fewer on Ray after a node was lost
        and until room for more returns."""
        return self._driver.size

    @property
    def num_failures(self) -> int:
        """Worker-group failures so far (each one started a new group)."""
        return self._driver.num_failures

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the current workers, by rank (e.g. to watch or signal them)."""
        return self._driver.pids

    def shutdown(self) -> None:
        """Stop the workers and delete the driver's state files; the trainer is unusable after."""
        self._driver.close()


def _end_at_exit(ref: weakref.ref[TorchTrainer]) -> None:
    trainer = ref()
    if trainer is not None:
        trainer._driver.close_at_exit()
