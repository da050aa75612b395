"""Digits: a small CNN on scikit-learn's 8x8 handwritten digits, as a Headway ``PyTorchTrial``.

The data ships with scikit-learn (``sklearn.datasets.load_digits``: 1,797 images, 10 classes), so
nothing is downloaded. The last 20% of the samples are the validation set (a fixed split).
"""

from __future__ import annotations

from typing import Any

import torch
from sklearn.datasets import load_digits
from torch import nn

from headway.pytorch import DataLoader, LRScheduler, PyTorchTrial, PyTorchTrialContext, TorchData

VALIDATION_FRACTION = 0.2


def digits_datasets() -> tuple[torch.utils.data.TensorDataset, torch.utils.data.TensorDataset]:
    """Return ``(train, validation)`` TensorDatasets of ``(images[N,1,8,8] in [0,1], labels[N])``."""
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    n_train = round(len(labels) * (1 - VALIDATION_FRACTION))
    train = torch.utils.data.TensorDataset(images[:n_train], labels[:n_train])
    validation = torch.utils.data.TensorDataset(images[n_train:], labels[n_train:])
    return train, validation


def build_model(channels: int, dropout: float) -> nn.Module:
    """Two 3x3 conv layers, a 2x2 max-pool and a two-layer classifier head."""
    return nn.Sequential(
        nn.Conv2d(1, channels, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(channels, 2 * channels, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(dropout),
        nn.Linear(2 * channels * 4 * 4, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


class DigitsTrial(PyTorchTrial):
    """Trains ``build_model`` with Adam and a per-epoch exponential LR decay."""

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.train_set, self.validation_set = digits_datasets()
        model = build_model(
            int(context.get_hparam("channels")), float(context.get_hparam("dropout"))
        )
        self.model = context.wrap_model(model)
        self.optimizer = context.wrap_optimizer(
            torch.optim.Adam(self.model.parameters(), lr=float(context.get_hparam("lr")))
        )
        self.lr_scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.ExponentialLR(
                self.optimizer, gamma=float(context.get_hparam("lr_decay"))
            ),
            step_mode=LRScheduler.StepMode.STEP_EVERY_EPOCH,
        )
        self.loss_fn = nn.CrossEntropyLoss()

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(
            self.train_set, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(self.validation_set, batch_size=256)

    def train_batch(self, batch: TorchData, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        images, labels = batch
        logits = self.model(images)
        loss = self.loss_fn(logits, labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: TorchData) -> dict[str, Any]:
        images, labels = batch
        logits = self.model(images)
        return {
            "validation_loss": self.loss_fn(logits, labels),
            "validation_accuracy": (logits.argmax(dim=1) == labels).float().mean(),
        }
