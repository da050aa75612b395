"""``DeepSpeedTrial.evaluate_full_dataset``: the chief validates over the
whole validation loader in one call, and its metrics are what is reported.

DeepSpeed runs on its CPU accelerator with gloo and torch's Adam (nothing is compiled).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import torch
from torch import nn

pytest.importorskip("deepspeed")

import deepspeed

from headway import pytorch
from headway.pytorch import DataLoader
from headway.pytorch import deepspeed as hw_ds

pytestmark = pytest.mark.slow  # DeepSpeed engines take seconds to build

CONFIG = {
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 1,
    "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
    "steps_per_print": 1000000,
}


def dataset(n: int) -> torch.utils.data.TensorDataset:
    x = torch.arange(n, dtype=torch.float32).view(n, 1)
    return torch.utils.data.TensorDataset(x, x)


class FullDataset(hw_ds.DeepSpeedTrial):
    """Defines evaluate_full_dataset and no evaluate_batch."""

    def __init__(self, context: hw_ds.DeepSpeedTrialContext) -> None:
        self.context = context
        model = nn.Linear(1, 1)
        engine, _, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=dict(CONFIG)
        )
        self.engine = context.wrap_model_engine(engine)
        self.loaders: list[Any] = []

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(dataset(8), batch_size=2)

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(dataset(10), batch_size=4)

    def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> Any:
        x, y = self.context.to_device(next(dataloader_iter))
        loss = nn.functional.mse_loss(self.engine(x), y)
        self.engine.backward(loss)
        self.engine.step()
        return {"loss": loss}

    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        self.loaders.append(data_loader)
        xs = torch.cat([x for x, _ in data_loader])
        return {
            "records": len(xs),
            "total": float(xs.sum()),
            "training": self.engine.module.training,
        }


def test_evaluate_full_dataset_sees_the_whole_validation_set(tmp_path: pathlib.Path) -> None:
    with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
        trial = FullDataset(context)
        hw_ds.Trainer(trial, context).fit(
            max_length=pytorch.Batch(4), validation_period=pytorch.Batch(2)
        )
        reported = context._core.train.reported_metrics("validation")
    assert [r["steps_completed"] for r in reported] == [2, 4]
    for record in reported:
        metrics = record["metrics"]
        assert (metrics["records"], metrics["total"], metrics["training"]) == (10, 45.0, False)
    assert all(isinstance(loader, torch.utils.data.DataLoader) for loader in trial.loaders)


def test_a_trial_with_both_validations_is_refused(tmp_path: pathlib.Path) -> None:
    class Both(FullDataset):
        def evaluate_batch(self, dataloader_iter: Any, batch_idx: int) -> dict[str, Any]:
            return {}

    class Neither(hw_ds.DeepSpeedTrial):
        __init__ = FullDataset.__init__
        build_training_data_loader = FullDataset.build_training_data_loader
        build_validation_data_loader = FullDataset.build_validation_data_loader
        train_batch = FullDataset.train_batch

    for cls, message in ((Both, "defines both"), (Neither, "must implement evaluate_batch")):
        with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
            trainer = hw_ds.Trainer(cls(context), context)
            with pytest.raises(TypeError, match=message):
                trainer.fit(max_length=pytorch.Batch(1))
