"""The Lightning peer row of bench/harness_overhead.py: the same models as a ``LightningModule``.

Lightning is not a dependency: ``lightning_version()`` is None when neither ``lightning`` nor
``pytorch_lightning`` imports, and the benchmark then reports ``"lightning": null``.
``run_lightning`` trains ``batches`` batches with ``Trainer(max_steps=batches, logger=False,
enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
accelerator=<the device's type>, devices=1)``; its loop is timed like the harness's, from the
first epoch's start to the end of training (a callback), with this process's CPU time beside.
"""

from __future__ import annotations

import importlib
import logging
import time
import warnings
from types import ModuleType
from typing import Any

import torch
from _harness_models import BATCH, model, optimizer, sync
from torch import nn


def _lightning() -> ModuleType | None:
    """``lightning.pytorch`` (Lightning 2.x), else ``pytorch_lightning``, else None."""
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def lightning_version() -> str | None:
    """The installed Lightning's version, None when it is not installed."""
    pl = _lightning()
    return None if pl is None else str(pl.__version__)


def run_lightning(
    kind: str, batches: int, data: torch.utils.data.TensorDataset, device: torch.device
) -> dict[str, float]:
    """One ``Trainer.fit()`` of ``batches`` batches: ``samples_per_s`` and ``cpu_us_per_batch``
    of its training loop (first epoch start to ``on_train_end``, after a device synchronize).

    Raises:
        RuntimeError: Lightning is not installed.
    """
    pl = _lightning()
    if pl is None:
        raise RuntimeError("Lightning is not installed")

    # Bases read from the module found at run time (Lightning is not a dependency).
    module_base: Any = pl.LightningModule
    callback_base: Any = pl.Callback

    class Module(module_base):
        def __init__(self) -> None:
            super().__init__()
            self.net = model(kind)
            self.loss_fn = nn.CrossEntropyLoss()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss: torch.Tensor = self.loss_fn(self.net(x), y)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return optimizer(self.net)

    class Clock(callback_base):
        started = done = cpu_started = cpu_done = 0.0

        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            if not self.started:
                sync(device)
                self.started, self.cpu_started = time.perf_counter(), time.process_time()

        def on_train_end(self, trainer: Any, module: Any) -> None:
            sync(device)
            self.done, self.cpu_done = time.perf_counter(), time.process_time()

    torch.manual_seed(0)
    clock = Clock()
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True)
    with warnings.catch_warnings():
        # "does not have many workers", "srun is available": advice, not part of what is measured.
        warnings.simplefilter("ignore")
        trainer = pl.Trainer(
            max_steps=batches,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            accelerator=device.type,
            devices=1,
            callbacks=[clock],
        )
        trainer.fit(Module(), train_dataloaders=loader)
    return {
        "samples_per_s": batches * BATCH / (clock.done - clock.started),
        "cpu_us_per_batch": (clock.cpu_done - clock.cpu_started) * 1e6 / batches,
    }


def quiet() -> None:
    """Keep Lightning's per-fit info lines (GPU available, ...) out of the benchmark's output."""
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
