"""``HeadwayCallback``: a Lightning ``Trainer`` that honours Headway's pause (preemption).

A Lightning logger never sees the ``Trainer``, so stopping it takes a callback. After every
training batch each rank asks ``core_context.preempt.should_preempt()`` (a collective in the
default ``PreemptMode.WorkersAskChief``, so every rank reaches it at the same batches); when the
trial is asked to stop, the ``Trainer`` saves a checkpoint and stops after the batch; when
training has ended rank zero registers the file as a Headway checkpoint
(``headway.lightning._checkpoints.store_file``). Determined's ``PyTorchTrial`` harness does the same between batches.
"""

from __future__ import annotations

import logging
import pathlib
import shutil
import tempfile
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback

from headway.core import Context
from headway.lightning._checkpoints import store_file
from headway.lightning._logger import HeadwayLogger

logger = logging.getLogger("headway.lightning")

PREEMPT_FILE = "preempted.ckpt"


class HeadwayCallback(Callback):
    """Checkpoint and stop a ``Trainer`` when Headway asks the trial to pause (or cancel).

    The checkpoint (``preempted.ckpt``, Lightning's full state: weights, optimizers, loops)
    is registered with ``steps_completed`` = ``trainer.global_step``, so
    ``latest_checkpoint_path(core_context)`` gives it to ``Trainer.fit(ckpt_path=...)`` when
    the trial is activated again; a fit restored from a checkpoint logs the step it resumes at,
    on every rank. In local mode ``should_preempt()`` is always False and the callback does
    nothing else.

    Arguments:
        core_context (headway.core.Context): the trial's Core API (``core.init()``).

    Raises:
        TypeError: when ``core_context`` is not a ``headway.core.Context``.
    """

    def __init__(self, core_context: Context) -> None:
        if not isinstance(core_context, Context):
            raise TypeError(
                "HeadwayCallback(core_context): expected the headway.core.Context of "
                f"core.init(), got {type(core_context).__name__}"
            )
        self._core = core_context
        self.preempted_at: int | None = None  # the global step of the preemption checkpoint
        self._file: pathlib.Path | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # The Trainer's HeadwayLoggers read steps_completed from it (see HeadwayLogger.attach).
        for each in trainer.loggers:
            if isinstance(each, HeadwayLogger):
                each.attach(trainer)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # After Lightning restored the loops: every rank says where it continues, so a resumed
        # trial's logs show that no rank started over.
        if trainer.ckpt_path is not None:
            logger.info(
                "rank %d resumes at step %d (epoch %d) from %s",
                trainer.global_rank,
                trainer.global_step,
                trainer.current_epoch,
                trainer.ckpt_path,
            )

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self.preempted_at is not None or not self._core.preempt.should_preempt():
            return
        self.preempted_at = trainer.global_step
        # Rank zero's temporary folder: the only rank that writes the file.
        folder: str = trainer.strategy.broadcast(
            tempfile.mkdtemp(prefix="headway-preempt-") if trainer.is_global_zero else ""
        )
        self._file = pathlib.Path(folder) / PREEMPT_FILE
        # Saved here, mid-epoch, so a resumed fit continues this epoch where it stopped; every
        # rank calls it (a collective under some strategies).
        trainer.save_checkpoint(self._file)
        trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Registered last, after what a ModelCheckpoint saves as the stopped epoch ends, so it
        # is the trial's latest checkpoint, the one a resumed run restores.
        if self._file is None or self.preempted_at is None or not trainer.is_global_zero:
            return
        try:
            storage_id = store_file(self._core, self._file, self.preempted_at, {"preempted": True})
        finally:
            shutil.rmtree(self._file.parent, ignore_errors=True)
            self._file = None
        logger.info("preempted at step %d: checkpoint %s", self.preempted_at, storage_id)
