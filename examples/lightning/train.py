"""A Lightning module on scikit-learn's digits reporting into Headway (see README.md).

On the cluster (``headway experiment create const.yaml .``) the trial's hparams set the module;
``HeadwayLogger`` reports ``train_loss`` and ``val_loss`` / ``val_accuracy`` and registers the
``ModelCheckpoint`` files; ``HeadwayCallback`` checkpoints and stops on pause; a resumed trial
continues from its latest checkpoint. Under torchrun (``distributed.yaml``: two slots) the
``Trainer`` runs DDP over torchrun's ranks. ``python train.py`` runs the same code locally, and
``python train.py --unmanaged`` reports to the master at ``$HEADWAY_MASTER`` as an unmanaged run.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from headway import core
from headway.experimental import core_v2
from headway.lightning import HeadwayCallback, HeadwayLogger, latest_checkpoint_path


class DigitsMLP(pl.LightningModule):
    """A two-layer perceptron over the 8x8 digit images (64 inputs, 10 classes)."""

    def __init__(self, lr: float = 0.01, hidden: int = 64) -> None:
        super().__init__()
        self.save_hyperparameters()  # Lightning hands them to the logger
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        # train_loss_step and train_loss_epoch; sync_dist: the mean over DDP ranks (no-op alone)
        self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        # Each DDP rank validates its share of the images: sync_dist averages them.
        self.log("val_loss", nn.functional.cross_entropy(logits, y), sync_dist=True)
        self.log("val_accuracy", (logits.argmax(dim=1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def loaders(batch_size: int) -> tuple[DataLoader, DataLoader]:
    """80 % of the 1,797 digits for training, 20 % for validation (fixed split)."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, random_state=0)
    train = DataLoader(TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=True)
    return train, DataLoader(TensorDataset(x_val, y_val), batch_size=256)


def distributed_kwargs(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``Trainer``'s ``strategy``/``devices``/``num_nodes`` for the ranks torchrun started.

    Under ``torchrun`` (``python -m headway.launch.torch_distributed`` on a trial with
    ``slots_per_trial`` > 1) ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` say how many processes run
    in all and on this host: one DDP device a process, gloo on the CPU; Lightning joins the
    group torchrun's environment describes rather than starting processes itself. Without it
    (``WORLD_SIZE`` unset or 1) one process on one device, as before.
    """
    env = os.environ if environ is None else environ
    world = int(env.get("WORLD_SIZE", "1"))
    if world <= 1:
        return {"devices": 1}
    local = int(env.get("LOCAL_WORLD_SIZE", str(world)))
    return {"strategy": "ddp", "devices": local, "num_nodes": world // local}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--unmanaged", action="store_true", help="report to $HEADWAY_MASTER")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    pl.seed_everything(0)

    if args.unmanaged:
        context = core_v2.init_context(
            config=core_v2.Config(
                name="lightning-digits",
                searcher={"name": "single", "metric": "val_loss", "smaller_is_better": True},
            )
        )
    else:
        context = core.init()  # managed on the cluster, local otherwise
    with context as core_context:
        hparams = core_context.info.trial.hparams if core_context.info else {}
        model = DigitsMLP(lr=float(hparams.get("lr", 0.01)), hidden=int(hparams.get("hidden", 64)))
        train, val = loaders(args.batch_size)
        trainer = pl.Trainer(
            max_epochs=args.max_epochs,
            accelerator="cpu",
            **distributed_kwargs(),
            logger=HeadwayLogger(core_context),
            callbacks=[
                HeadwayCallback(core_context),
                ModelCheckpoint(dirpath="lightning_checkpoints", monitor="val_loss"),
            ],
            log_every_n_steps=10,
            enable_progress_bar=False,
        )
        trainer.fit(model, train, val, ckpt_path=latest_checkpoint_path(core_context))


if __name__ == "__main__":
    main()
