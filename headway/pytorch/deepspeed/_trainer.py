"""``init()`` and ``Trainer`` for ``DeepSpeedTrial`` (Determined 0.38's
``det.pytorch.deepspeed.init`` / ``Trainer``), built on ``headway.pytorch``'s.

``Trainer.fit`` is ``headway.pytorch.Trainer.fit`` (same arguments, lengths, periods, searcher
operations, preemption and resume); this module only changes what differs for DeepSpeed: data
loaders follow the model-parallel unit and are consumed through iterators, one batch is
``gradient_accumulation_steps`` micro-batches, and checkpoints are written by every rank.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from headway import core
from headway import pytorch as hw_pytorch
from headway.pytorch._dataloader import ResumableLoader, _PlainLoader
from headway.pytorch._trainer_config import TrainerConfig
from headway.pytorch._trainer_utils import evaluates_full_dataset, open_trial_context, resumable
from headway.pytorch.deepspeed import _setup
from headway.pytorch.deepspeed._context import DeepSpeedTrialContext
from headway.pytorch.deepspeed._data import BatchSlots, MicroBatchStream
from headway.pytorch.deepspeed._loop import _DeepSpeedLoop
from headway.pytorch.deepspeed._trial import DeepSpeedTrial

logger = logging.getLogger("headway.pytorch.deepspeed")


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    distributed: core.DistributedContext | None = None,
    checkpoint_storage: Any = None,
    trial_seed: int | None = None,
    local_trial_id: int = 0,
    enable_tensorboard_logging: bool = True,
) -> Iterator[DeepSpeedTrialContext]:
    """Set up DeepSpeed's process group and yield a ``DeepSpeedTrialContext``.

    Calls ``deepspeed.init_distributed(auto_mpi_discovery=False)`` first (adopting a
    ``torch.distributed`` group that already exists). A process started without a launcher
    gets ``RANK=0``, ``WORLD_SIZE=1``, ``LOCAL_RANK=0``, ``LOCAL_WORLD_SIZE=1``,
    ``GROUP_RANK=0``, ``MASTER_ADDR=127.0.0.1`` and a free ``MASTER_PORT`` in its environment
    (variables already set are kept) while the block runs; they are removed again on exit (the
    process group stays up: DeepSpeed cannot re-create it in one process, a later ``init()``
    reuses it). Under a launcher with several ranks, ``distributed`` defaults to
    ``core.DistributedContext.from_torch_distributed()``. Then as ``headway.pytorch.init``:
    seeds Python, NumPy and torch from the trial seed, opens the Core API context.

    Arguments:
        hparams, exp_conf, checkpoint_storage, trial_seed, local_trial_id: as
            ``headway.pytorch.init`` (local mode only for hparams / exp_conf / trial_seed).
        distributed (core.DistributedContext | None): the ranks (default: from the launcher's
            environment).
        enable_tensorboard_logging (bool): as ``headway.pytorch.init``.
    """
    with contextlib.ExitStack() as stack:
        stack.enter_context(_setup.distributed_session())
        if distributed is None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            distributed = core.DistributedContext.from_torch_distributed()
        context = stack.enter_context(
            open_trial_context(
                DeepSpeedTrialContext,
                hparams=hparams,
                exp_conf=exp_conf,
                distributed=distributed,
                checkpoint_storage=checkpoint_storage,
                trial_seed=trial_seed,
                local_trial_id=local_trial_id,
                caller="pytorch.deepspeed.init()",
            )
        )
        context.set_enable_tensorboard_logging(enable_tensorboard_logging)
        yield context


class Trainer(hw_pytorch.Trainer):
    """Trains a ``DeepSpeedTrial``: ``Trainer(trial, context).fit(...)``.

    ``fit()`` takes ``headway.pytorch.Trainer.fit``'s arguments with the same meaning; a
    ``Batch`` is one global batch of ``train_batch_size`` records (``train_batch`` called once
    per micro-batch of gradient accumulation), an ``Epoch`` is ``len(training loader) //
    gradient_accumulation_steps`` batches. Checkpoints are written by every rank
    (docs/deepspeed.md, "Checkpoints").

    Arguments:
        trial (DeepSpeedTrial): built with ``context``; it wrapped at least one engine.
        context (DeepSpeedTrialContext): from ``headway.pytorch.deepspeed.init()``.

    Raises:
        TypeError: ``trial`` is not a ``DeepSpeedTrial`` or ``context`` not a
            ``DeepSpeedTrialContext``.
        RuntimeError: the trial wrapped no engine (``context.wrap_model_engine``).
    """

    _trial_type = DeepSpeedTrial
    _loop_type = _DeepSpeedLoop
    _context: DeepSpeedTrialContext

    def __init__(self, trial: DeepSpeedTrial, context: DeepSpeedTrialContext) -> None:
        if not isinstance(context, DeepSpeedTrialContext):
            raise TypeError(
                f"Trainer needs a DeepSpeedTrialContext, got {type(context).__name__}; build it "
                "with headway.pytorch.deepspeed.init()"
            )
        super().__init__(trial, context)
        if not context.models:
            raise RuntimeError(
                f"{type(trial).__name__} wrapped no DeepSpeed engine: call "
                "context.wrap_model_engine(engine) in __init__"
            )

    def _global_batch_size(self) -> int:
        return self._context.get_global_batch_size()

    def _data_loaders(self, conf: TrainerConfig, gbs: Any) -> tuple[Any, Any, int]:
        """Streams over the trial's loaders on ranks that build them (sharded by the
        data-parallel rank); batches per epoch and validation calls agreed over all ranks."""
        ctx = self._context
        mpu = ctx._mpu
        per_call = ctx.get_num_micro_batches_per_slot()
        train = val = None
        lengths: tuple[int, int] | None = None
        # evaluate_full_dataset: the chief alone builds the validation loader, unsharded.
        full = evaluates_full_dataset(self._trial, DeepSpeedTrial)
        if mpu.should_build_data_loader:
            train = MicroBatchStream(
                self._loader(self._trial.build_training_data_loader(), True), repeat=True
            )
            if not full or ctx.distributed.rank == 0:
                val = MicroBatchStream(
                    self._loader(self._trial.build_validation_data_loader(), False, shard=not full),
                    repeat=False,
                    batch_length=self._trial.get_batch_length,
                )
            lengths = (len(train), 0 if val is None else len(val))
        everyone = [lengths] if ctx.distributed.size == 1 else ctx.distributed.allgather(lengths)
        known = [pair for pair in everyone if pair is not None]
        if not known:
            raise RuntimeError("no rank built data loaders (ModelParallelUnit)")
        micro_batches = min(pair[0] for pair in known)
        if max(pair[0] for pair in known) != micro_batches:
            logger.warning("training loaders differ in length across ranks; using the shortest")
        per_epoch = micro_batches // per_call
        if per_epoch == 0:
            raise ValueError(
                f"the training data loader has {micro_batches} batches per epoch, fewer than "
                f"gradient_accumulation_steps ({per_call}): one harness batch needs that many"
            )
        val_calls = min(pair[1] for pair in known)
        if ctx.use_pipeline_parallel:
            val_calls //= per_call  # each eval_batch() takes that many micro-batches
        if full:
            val_calls = 1  # one evaluate_full_dataset() call per validation
        elif val_calls == 0:
            raise ValueError("the validation data loader has no batches for evaluate_batch()")
        ctx._position.batches_per_epoch = per_epoch
        return (
            BatchSlots(train, per_epoch, rewind=False),
            BatchSlots(val, val_calls, rewind=True),
            per_epoch,
        )

    def _loader(
        self, loader: Any, training: bool, shard: bool = True
    ) -> ResumableLoader | _PlainLoader:
        ctx = self._context
        where = "build_training_data_loader" if training else "build_validation_data_loader"
        wrapped = resumable(
            loader,
            where,
            seed=ctx.get_trial_seed(),
            rank=ctx._mpu.data_parallel_rank if shard else 0,
            size=ctx._mpu.data_parallel_world_size if shard else 1,
            training=training,
            checks_disabled=ctx._data_repro_checks_disabled
            or ctx.experimental._data_repro_checks_disabled,
        )
        if not wrapped.has_length():
            raise TypeError(f"{where}() returned a {type(loader).__name__}: it needs len()")
        return wrapped
