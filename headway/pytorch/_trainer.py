"""``Trainer`` and ``init()``: run a ``PyTorchTrial`` locally or on the cluster.

Same shape as Determined's PyTorch Trainer API (``det.pytorch.init()`` +
``Trainer(trial, context).fit(...)``): lengths come from ``fit()``'s arguments locally and from
the experiment config (searcher operations, ``min_validation_period``, ``min_checkpoint_period``,
``scheduling_unit``) on the cluster.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import pathlib
from collections.abc import Iterator
from typing import Any

from headway import core
from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch._fit_lengths import cluster_max_length, local_max_length
from headway.pytorch._loop import DONE, PREEMPTED, _Loop
from headway.pytorch._profiler import fit_extras
from headway.pytorch._trainer_config import TrainerConfig
from headway.pytorch._trainer_utils import (
    batches_per_epoch,
    evaluates_full_dataset,
    open_trial_context,
    resumable,
    to_batches,
)
from headway.pytorch._trial import PyTorchTrial
from headway.pytorch._units import Batch, TrainUnit, unit_from_config

logger = logging.getLogger("headway.pytorch")

_POLICIES = ("best", "all", "none")


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    distributed: core.DistributedContext | None = None,
    checkpoint_storage: Any = None,
    trial_seed: int | None = None,
    local_trial_id: int = 0,
    aggregation_frequency: int | None = None,
    enable_tensorboard_logging: bool = True,
) -> Iterator[PyTorchTrialContext]:
    """Open a Core API context and yield a ``PyTorchTrialContext`` for building a trial.

    Seeds Python, NumPy and torch from the trial seed before yielding, so a trial's
    ``__init__`` is reproducible (Determined does the same).

    Arguments:
        hparams (dict | None): local mode only: the trial's hyperparameters (on the cluster
            they come from the trial and this is ignored with a warning).
        exp_conf (dict | None): local mode only: an experiment config for
            ``get_experiment_config()`` (``searcher.metric`` picks the "best" checkpoints).
        distributed (core.DistributedContext | None): passed to ``headway.core.init``.
            Default: under a launcher with several ranks (``$WORLD_SIZE`` > 1, e.g.
            ``python -m headway.launch.torch_distributed``) ``init()`` creates the
            ``torch.distributed`` group itself (NCCL on a GPU host, gloo otherwise; destroyed
            on exit) and joins it, as Determined's does; else a single worker.
        checkpoint_storage: passed to ``headway.core.init`` (local mode: a directory or a
            storage config; default: its local checkpoint directory).
        trial_seed (int | None): local mode seed (default: ``reproducibility.experiment_seed``
            from ``exp_conf``, else 0).
        local_trial_id (int): the trial id a local run stamps on its checkpoints. A local run
            resumes a checkpoint with the same trial id and warm-starts from any other.
        aggregation_frequency (int | None): accumulate gradients over this many batches per
            optimizer step (Determined's ``init(aggregation_frequency=)``). None: the config's
            ``optimizations.aggregation_frequency`` (default 1). The config's
            ``optimizations.average_aggregated_gradients`` (default True) sets the default of
            ``wrap_optimizer(average_aggregated_gradients=)``.
        enable_tensorboard_logging (bool): write reported metrics to TensorBoard and store the
            TensorBoard folder with checkpoints (``context.set_enable_tensorboard_logging``).
    """

    def make_context(core_context: Any, **common: Any) -> PyTorchTrialContext:
        config: TrainerConfig = common["trainer_config"]
        frequency = aggregation_frequency
        if frequency is None:
            frequency = config.aggregation_frequency
        return PyTorchTrialContext(
            core_context,
            aggregation_frequency=frequency,
            average_aggregated_gradients=config.average_aggregated_gradients,
            **common,
        )

    with open_trial_context(
        make_context,
        hparams=hparams,
        exp_conf=exp_conf,
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        trial_seed=trial_seed,
        local_trial_id=local_trial_id,
        caller="pytorch.init()",
    ) as context:
        context.set_enable_tensorboard_logging(enable_tensorboard_logging)
        yield context


class Trainer:
    """Trains a ``PyTorchTrial``: ``Trainer(trial, context).fit(...)``.

    Arguments:
        trial (PyTorchTrial): built with ``context``.
        context (PyTorchTrialContext): from ``headway.pytorch.init()``.

    Attributes:
        latest_checkpoint (str | None): storage id of the last checkpoint ``fit()`` saved.
    """

    # What a subclass (headway.pytorch.deepspeed.Trainer) trains, and with which loop.
    _trial_type: type = PyTorchTrial
    _loop_type: type[_Loop] = _Loop

    def __init__(self, trial: Any, context: PyTorchTrialContext) -> None:
        if not isinstance(trial, self._trial_type):
            raise TypeError(
                f"{type(self).__name__} needs a {self._trial_type.__name__}, "
                f"got {type(trial).__name__}"
            )
        self._trial: Any = trial  # a _trial_type instance
        self._context = context
        self.latest_checkpoint: str | None = None
        self._profiling_enabled = False  # configure_profiler(enabled=True)

    def configure_profiler(
        self,
        sync_timings: bool = True,
        enabled: bool = False,
        begin_on_batch: int = 0,
        end_after_batch: int | None = None,
    ) -> None:
        """Deprecated in Determined: use ``fit(..., profiling_enabled=True)``.

        ``enabled=True`` turns system-metric profiling on for the next ``fit()``; the other
        arguments are ignored, as in Determined 0.38.1 (which ignores all of them and logs an
        error). For ``torch.profiler`` traces use ``context.set_profiler(...)``.
        """
        logger.warning(
            "Trainer.configure_profiler() is deprecated; use fit(..., profiling_enabled=True) "
            "(sync_timings, begin_on_batch and end_after_batch are ignored)"
        )
        self._profiling_enabled = bool(enabled)

    def fit(
        self,
        checkpoint_period: TrainUnit | None = None,
        validation_period: TrainUnit | None = None,
        max_length: TrainUnit | None = None,
        reporting_period: TrainUnit = Batch(100),  # noqa: B008 - immutable value object
        checkpoint_policy: str = "best",
        latest_checkpoint: str | None = None,
        step_zero_validation: bool = False,
        test_mode: bool = False,
        profiling_enabled: bool = False,
        torch_load_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """Train, validate and checkpoint until the length is reached or the trial is preempted.

        Arguments:
            checkpoint_period (Batch | Epoch | None): checkpoint this often (plus at the end and on
                preemption). Default: the config's ``min_checkpoint_period``.
            validation_period (Batch | Epoch | None): validate this often (plus at the end).
                Default: the config's ``min_validation_period``.
            max_length (Batch | Epoch | None): how long to train locally (default: the config's
                ``searcher.max_length``; one of them is required). On the cluster, when the
                config has ``searcher.max_length`` the searcher's operations decide and this is
                ignored with a warning; without it (Determined 0.38) this length is trained
                (default: ``max_time`` of an ``adaptive_asha`` with ``time_metric`` batches or
                epochs; else required).
            reporting_period (Batch): average and report training metrics this often (cluster:
                ``scheduling_unit`` batches).
            checkpoint_policy (str): ``"best"`` (also checkpoint after a validation that
                improves ``searcher.metric``), ``"all"`` (after every validation) or ``"none"``.
            latest_checkpoint (str | None): storage id, or a local checkpoint directory, to start
                from (cluster default: the trial's ``latest_checkpoint``). Same trial id: resume
                exactly; other trial id: load the state dicts, start counters at 0.
            step_zero_validation (bool): validate once before training.
            test_mode (bool): local only (as in Determined): train one batch, validate one
                batch (``evaluate_full_dataset`` still sees the whole set), checkpoint, return.
            profiling_enabled (bool): report system metrics (``cpu_util_simple``,
                ``memory_free``) in the metric group ``profiling`` while training.
            torch_load_kwargs (dict | None): Headway extension (the name of
                ``load_trial_from_checkpoint_path``'s argument): ``torch.load`` arguments for
                the checkpoint restored at start. Checkpoints load with ``weights_only=True``;
                ``{"weights_only": False}`` trusts the checkpoint's pickles (docs/security.md).

        Returns normally on completion and on preemption (after checkpointing), so the process
        exits 0. Raises ``ValueError`` for inconsistent lengths (naming the argument or field).
        """
        ctx = self._context
        info = ctx._core.info  # ClusterInfo on the cluster, None locally
        conf = ctx._trainer_config
        if checkpoint_policy not in _POLICIES:
            raise ValueError(
                f"checkpoint_policy must be one of {_POLICIES}, got {checkpoint_policy!r}"
            )
        gbs = self._global_batch_size()
        # The config fills in what fit() was not given; on the cluster it always decides the
        # reporting period, and the searcher (not max_length) decides how long to train.
        if validation_period is None:
            validation_period = unit_from_config(
                conf.min_validation_period, "min_validation_period", gbs
            )
        if checkpoint_period is None:
            checkpoint_period = unit_from_config(
                conf.min_checkpoint_period, "min_checkpoint_period", gbs
            )
        if info is not None:
            max_length = cluster_max_length(conf, max_length, test_mode)
            reporting_period = Batch(conf.scheduling_unit)
            if latest_checkpoint is None:
                latest_checkpoint = info.latest_checkpoint
        elif max_length is None:
            max_length = local_max_length(conf, gbs, test_mode)
        callbacks = self._trial.build_callbacks()
        train_loader, val_loader, per_epoch = self._data_loaders(conf, gbs)
        loop = self._loop_type(
            self._trial,
            ctx,
            callbacks,
            train_loader,
            val_loader,
            validation_period=to_batches(validation_period, per_epoch, "validation_period"),
            checkpoint_period=to_batches(checkpoint_period, per_epoch, "checkpoint_period"),
            reporting_period=to_batches(reporting_period, per_epoch, "reporting_period")
            or Batch(100),
            checkpoint_policy=checkpoint_policy,
            searcher_metric=conf.searcher_metric,
            smaller_is_better=conf.smaller_is_better,
            test_mode=test_mode,
        )
        if latest_checkpoint is not None:
            self._restore(loop, latest_checkpoint, torch_load_kwargs or {})
        for cb in callbacks.values():
            cb.on_trial_startup(ctx._position.batches_trained, latest_checkpoint)
        # code/, load_data.json, tensorboard/ in checkpoints; set_profiler; system metrics.
        extras = fit_extras(self._trial, ctx, profiling_enabled or self._profiling_enabled)
        try:
            for cb in callbacks.values():
                cb.on_training_start()
            self._train(
                loop,
                conf,
                max_length,
                per_epoch,
                gbs,
                step_zero_validation=step_zero_validation,
                test_mode=test_mode,
            )
        finally:
            extras.close()
            self.latest_checkpoint = loop.latest_checkpoint
            for cb in callbacks.values():
                cb.on_trial_shutdown()

    def _global_batch_size(self) -> Any:
        """Records per batch, to turn ``records`` lengths into batches (None: not known)."""
        return self._context.get_hparams().get("global_batch_size")

    def _data_loaders(self, conf: TrainerConfig, gbs: Any) -> tuple[Any, Any, int]:
        """Build the trial's loaders: ``(train, validation, batches per epoch)``.

        Also sets the context's epoch length (None when the loader has no length).
        """
        ctx = self._context
        size, rank = ctx.distributed.size, ctx.distributed.rank
        train_loader = resumable(
            self._trial.build_training_data_loader(),
            "build_training_data_loader",
            seed=ctx.get_trial_seed(),
            rank=rank,
            size=size,
            training=True,
            checks_disabled=ctx.experimental._data_repro_checks_disabled,
        )
        # evaluate_full_dataset runs on the chief over the whole validation set (Determined).
        full = evaluates_full_dataset(self._trial, PyTorchTrial)
        val_loader = resumable(
            self._trial.build_validation_data_loader(),
            "build_validation_data_loader",
            seed=ctx.get_trial_seed(),
            rank=0 if full else rank,
            size=1 if full else size,
            training=False,
            checks_disabled=ctx.experimental._data_repro_checks_disabled,
        )
        per_epoch = batches_per_epoch(train_loader, conf, gbs)
        ctx._position.batches_per_epoch = per_epoch if train_loader.has_length() else None
        return train_loader, val_loader, per_epoch

    def _train(
        self,
        loop: _Loop,
        conf: TrainerConfig,
        max_length: TrainUnit | None,
        per_epoch: int,
        gbs: int | None,
        *,
        step_zero_validation: bool,
        test_mode: bool,
    ) -> None:
        """The initial validation, then one batch (``test_mode``), ``max_length``, or the
        searcher's operations."""
        batches_trained = self._context._position.batches_trained
        operations = None
        if not test_mode and max_length is None:
            # Taken before the initial validation: that validation's report is not a script
            # ignoring its searcher operations (the Core API warns about those).
            operations = self._context._core.searcher.operations()
        if step_zero_validation and batches_trained == 0:
            loop.validate()
        if operations is not None:
            self._run_searcher(loop, operations, conf, per_epoch, gbs)
        elif test_mode:
            self._finish(loop, loop.train_to(batches_trained + 1), None)
        elif max_length is not None:
            target = to_batches(max_length, per_epoch, "max_length")
            assert target is not None
            self._finish(loop, loop.train_to(target.length()), None)

    def _run_searcher(
        self,
        loop: _Loop,
        operations: Iterator[Any],
        conf: TrainerConfig,
        per_epoch: int,
        gbs: int | None,
    ) -> None:
        max_length = conf.max_length
        assert max_length is not None  # the searcher's operations come with its max_length
        batches_per_unit = max_length.batches_per_unit(
            batches_per_epoch=per_epoch or None, global_batch_size=gbs, field="searcher.max_length"
        )
        for op in operations:
            loop.op, loop.op_batches_per_unit = op, batches_per_unit
            target = math.ceil(op.length * batches_per_unit)
            if not self._finish(loop, loop.train_to(target), op):
                return

    def _finish(self, loop: _Loop, outcome: str, op: Any) -> bool:
        """Close an operation; return False when training must stop (preempted / stopped)."""
        loop.report_training()
        steps = loop.pos.batches_trained
        if outcome == PREEMPTED:
            loop.checkpoint()
            self._context._core.preempt.acknowledge_preemption_signal()
            logger.info("preempted at %d batches; checkpointed, exiting", steps)
            return False
        last = loop.last_validation
        metrics = last["metrics"] if last and last["steps"] == steps else loop.validate()
        loop.checkpoint()
        if op is not None and loop.is_chief:
            value = loop.searcher_value(metrics)
            op.report_completed(value if value is not None else float("nan"))
        return outcome == DONE

    def _restore(
        self, loop: _Loop, latest_checkpoint: str, torch_load_kwargs: dict[str, Any]
    ) -> None:
        ctx = self._context
        local_dir = pathlib.Path(latest_checkpoint)
        if local_dir.is_dir():
            cm: Any = contextlib.nullcontext(local_dir)
            meta_file = local_dir / "metadata.json"
            metadata = json.loads(meta_file.read_text()) if meta_file.exists() else {}
        else:
            cm = ctx._core.checkpoint.restore_path(latest_checkpoint)
            metadata = ctx._core.checkpoint.get_metadata(latest_checkpoint) or {}
        with cm as path:
            state = loop.read_state(pathlib.Path(path), torch_load_kwargs)
            for cb in loop.callbacks:
                cb.on_checkpoint_load_start(state)  # Determined: before anything is restored
            loop.apply_weights(state, pathlib.Path(path))
            trainer_state = state.get("trainer_state") or {}
            source_trial = metadata.get("trial_id", trainer_state.get("trial_id"))
            if source_trial == ctx.get_trial_id() and trainer_state:
                loop.load_trainer_state(trainer_state)
                loop.latest_checkpoint = latest_checkpoint
                ckpt.restore_rng_state(state["rng_state"])
                ckpt.restore_tensorboard(pathlib.Path(path), ctx)
                logger.info(
                    "resumed from %s at %d batches", latest_checkpoint, loop.pos.batches_trained
                )
            else:
                logger.info(
                    "warm start from %s (trial %s): weights loaded, counters at 0",
                    latest_checkpoint,
                    source_trial,
                )
            for cb in loop.callbacks:
                cb.on_checkpoint_load(str(path))
