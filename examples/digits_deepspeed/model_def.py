"""Digits as a ``DeepSpeedTrial``: the CNN of ``examples/digits`` trained by a DeepSpeed engine.

ZeRO stage 1, gradient accumulation over 2 micro-batches and torch's Adam, from
``ds_config.json``; the hyperparameters ``global_batch_size`` (DeepSpeed's ``train_batch_size``)
and ``lr`` are written over it, so DeepSpeed derives the micro-batch size per slot:
32 / (2 x slots), i.e. 16 on one slot and 8 on two, the same global batch either way. The data ships with scikit-learn
(``load_digits``: 1,797 8x8 images); the last 20% are the validation set.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import deepspeed
import torch
from sklearn.datasets import load_digits
from torch import nn

from headway.pytorch import DataLoader
from headway.pytorch.deepspeed import (
    DeepSpeedTrial,
    DeepSpeedTrialContext,
    overwrite_deepspeed_config,
)

DS_CONFIG = pathlib.Path(__file__).resolve().parent / "ds_config.json"


def digits_datasets() -> tuple[torch.utils.data.TensorDataset, torch.utils.data.TensorDataset]:
    """``(train, validation)``: images ``[N, 1, 8, 8]`` scaled to [0, 1] and labels ``[N]``."""
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    split = round(0.8 * len(labels))
    return (
        torch.utils.data.TensorDataset(images[:split], labels[:split]),
        torch.utils.data.TensorDataset(images[split:], labels[split:]),
    )


def build_model(channels: int, dropout: float) -> nn.Module:
    """Two 3x3 convolutions, a 2x2 max-pool and a two-layer head (as examples/digits)."""
    return nn.Sequential(
        nn.Conv2d(1, channels, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(channels, 2 * channels, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(dropout),
        nn.Linear(2 * channels * 16, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


class DigitsDeepSpeedTrial(DeepSpeedTrial):
    """One engine; the harness calls ``train_batch`` once per micro-batch (2 per batch)."""

    def __init__(self, context: DeepSpeedTrialContext) -> None:
        self.context = context
        self.train_set, self.validation_set = digits_datasets()
        hparams = context.get_hparams()
        model = build_model(int(hparams["channels"]), float(hparams["dropout"]))
        ds_config = overwrite_deepspeed_config(
            str(DS_CONFIG),
            {
                "train_batch_size": context.get_global_batch_size(),
                "optimizer": {"params": {"lr": float(hparams["lr"])}},
            },
        )
        engine, _, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=ds_config
        )
        self.engine = context.wrap_model_engine(engine)
        self.loss_fn = nn.CrossEntropyLoss()

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(
            self.train_set,
            batch_size=self.context.get_train_micro_batch_size_per_gpu(),
            shuffle=True,
        )

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(self.validation_set, batch_size=128)

    def train_batch(
        self, dataloader_iter: Iterator[Any] | None, epoch_idx: int, batch_idx: int
    ) -> dict[str, Any]:
        assert dataloader_iter is not None
        images, labels = self.context.to_device(next(dataloader_iter))
        loss = self.loss_fn(self.engine(images), labels)
        self.engine.backward(loss)
        self.engine.step()
        return {"loss": loss}

    def evaluate_batch(
        self, dataloader_iter: Iterator[Any] | None, batch_idx: int
    ) -> dict[str, Any]:
        assert dataloader_iter is not None
        images, labels = self.context.to_device(next(dataloader_iter))
        logits = self.engine(images)
        return {
            "validation_loss": self.loss_fn(logits, labels),
            "validation_accuracy": (logits.argmax(dim=1) == labels).float().mean(),
        }
