"""A tiny Lightning module and data for the headway.lightning tests (CPU, a second a run)."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


class TinyRegression(pl.LightningModule):
    """y = x @ w, trained with SGD; logs ``train_loss`` (step and epoch) and ``val_loss``."""

    def __init__(self, lr: float = 0.1, width: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(width, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def loaders(batches: int = 4, batch_size: int = 4) -> tuple[DataLoader, DataLoader]:
    """Training and validation loaders of ``batches`` batches each (fixed seed)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batches * batch_size, 4, generator=generator)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    data = TensorDataset(x, y)
    return DataLoader(data, batch_size=batch_size), DataLoader(data, batch_size=batch_size)


def trainer_kwargs(root) -> dict:
    """Quiet, CPU, deterministic ``Trainer`` arguments logging every step."""
    return {
        "accelerator": "cpu",
        "devices": 1,
        "default_root_dir": str(root),
        "log_every_n_steps": 1,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
    }
