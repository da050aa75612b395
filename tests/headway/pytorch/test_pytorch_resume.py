"""Checkpoint format and exact resumption of a PyTorchTrial (headway.pytorch harness, CPU)."""

from __future__ import annotations

import json
import pathlib
import random
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from headway import pytorch
from headway.pytorch import Batch, DataLoader, LRScheduler, PyTorchTrial, PyTorchTrialContext

N_SAMPLES = 200  # with batch size 16: 13 batches per epoch, the last one partial


class _NoisyDataset(torch.utils.data.Dataset):
    """Random features plus per-item noise drawn from the global torch/numpy/python RNGs."""

    def __init__(self) -> None:
        gen = torch.Generator().manual_seed(123)
        self.x = torch.randn(N_SAMPLES, 8, generator=gen)
        self.y = (self.x.sum(1) > 0).long()

    def __len__(self) -> int:
        return N_SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        noise = 0.01 * torch.randn(8) + 0.001 * float(np.random.rand()) + 0.001 * random.random()
        return self.x[i] + noise, self.y[i]


class _Recorder(pytorch.PyTorchCallback):
    def __init__(self) -> None:
        self.counter = 0
        self.events: list[str] = []

    def on_training_start(self) -> None:
        self.events.append("training_start")

    def on_checkpoint_save(self, checkpoint_dir: str) -> None:
        self.events.append("checkpoint_save")

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        self.events.append("checkpoint_load")

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        self.counter += 1

    def state_dict(self) -> dict[str, Any]:
        return {"counter": self.counter}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.counter = state_dict["counter"]


class ResumeTrial(PyTorchTrial):
    """MLP with dropout, Adam and a per-batch LR schedule on shuffled noisy data."""

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(
            nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 2))
        )
        self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), 0.01))
        context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=7, gamma=0.9),
            step_mode=LRScheduler.StepMode.STEP_EVERY_BATCH,
        )
        self.seen: list[tuple[int, int]] = []
        self.recorder = _Recorder()

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(
            _NoisyDataset(), batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(_NoisyDataset(), batch_size=50)

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        return {"recorder": self.recorder}

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.seen.append((epoch_idx, batch_idx))
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        x, y = batch
        # Validation that consumes RNG must not change how training continues.
        _ = torch.rand(3)
        return {"validation_loss": nn.functional.cross_entropy(self.model(x), y)}


HPARAMS = {"global_batch_size": 16}


def _fit(
    storage: pathlib.Path,
    length: int,
    *,
    trial_id: int = 0,
    latest: str | None = None,
    **fit_kwargs: Any,
) -> tuple[ResumeTrial, pytorch.Trainer, dict[str, list[dict[str, Any]]]]:
    with pytorch.init(
        hparams=HPARAMS, checkpoint_storage=str(storage), trial_seed=7, local_trial_id=trial_id
    ) as ctx:
        trial = ResumeTrial(ctx)
        trainer = pytorch.Trainer(trial, ctx)
        fit_kwargs.setdefault("reporting_period", Batch(5))
        trainer.fit(max_length=Batch(length), latest_checkpoint=latest, **fit_kwargs)
        reports = {
            "training": ctx._core.train.reported_metrics("training"),
            "validation": ctx._core.train.reported_metrics("validation"),
        }
    return trial, trainer, reports


def _params(trial: ResumeTrial) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trial.model.parameters()]


def test_it_writes_the_documented_checkpoint_format(tmp_path: pathlib.Path) -> None:
    trial, trainer, _ = _fit(tmp_path, 20, trial_id=5)
    ckpt_dir = tmp_path / str(trainer.latest_checkpoint)
    assert (ckpt_dir / "state-dict.pth").is_file()
    state = torch.load(ckpt_dir / "state-dict.pth", weights_only=False)
    assert {
        "models_state_dict",
        "optimizers_state_dict",
        "lr_schedulers_state_dict",
        "callbacks",
        "rng_state",
        "trainer_state",
    } <= set(state)
    assert len(state["models_state_dict"]) == 1
    assert set(state["models_state_dict"][0]) == set(trial.model.state_dict())
    assert state["lr_schedulers_state_dict"][0]["last_epoch"] == 20
    assert state["callbacks"] == {"recorder": {"counter": 1}}
    assert {"python", "numpy", "torch"} <= set(state["rng_state"])
    assert state["trainer_state"]["batches_trained"] == 20
    assert state["trainer_state"]["dataloader"] == {"epoch": 1, "batch_in_epoch": 7}
    metadata = json.loads((ckpt_dir / "metadata.json").read_text())
    assert metadata["steps_completed"] == 20
    assert metadata["trial_id"] == 5
    assert metadata["format"] == "pytorch"
    assert metadata["framework"] == f"torch-{torch.__version__}"
    assert trial.recorder.events[:2] == ["training_start", "checkpoint_save"]


@pytest.mark.parametrize(
    "stop_at",  # epoch boundary, mid-epoch, mid-epoch later (longest)
    [13, 20, pytest.param(37, marks=pytest.mark.slow)],
)
def test_it_resumes_bitwise_equal_to_an_uninterrupted_run(
    tmp_path: pathlib.Path, stop_at: int
) -> None:
    full, _, _ = _fit(tmp_path / "full", 45)

    first, trainer, reports_a = _fit(tmp_path / "split", stop_at)
    second, _, reports_b = _fit(tmp_path / "split", 45, latest=trainer.latest_checkpoint)

    for a, b in zip(_params(full), _params(second), strict=True):
        assert torch.equal(a, b)
    assert full.optimizer.state_dict()["state"][0]["exp_avg"].equal(
        second.optimizer.state_dict()["state"][0]["exp_avg"]
    )
    assert first.seen + second.seen == full.seen  # same epochs and batch indices, in order
    assert second.recorder.counter == full.recorder.counter
    assert "checkpoint_load" in second.recorder.events
    steps = [r["steps_completed"] for r in reports_a["training"] + reports_b["training"]]
    assert steps == sorted(set(steps)) and steps[-1] == 45
    val_steps = [r["steps_completed"] for r in reports_a["validation"] + reports_b["validation"]]
    assert val_steps == sorted(set(val_steps)) and val_steps[-1] == 45


def test_it_warm_starts_from_another_trials_checkpoint(tmp_path: pathlib.Path) -> None:
    source, trainer, _ = _fit(tmp_path, 20, trial_id=1)
    weights = _params(source)

    class _FirstWeights(pytorch.PyTorchCallback):
        def __init__(self, trial: ResumeTrial) -> None:
            self.trial = trial
            self.at_start: list[torch.Tensor] = []

        def on_training_start(self) -> None:
            self.at_start = _params(self.trial)

    class WarmTrial(ResumeTrial):
        def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
            self.first = _FirstWeights(self)
            return {"recorder": self.recorder, "first": self.first}

    with pytorch.init(
        hparams=HPARAMS, checkpoint_storage=str(tmp_path), trial_seed=7, local_trial_id=2
    ) as ctx:
        warm = WarmTrial(ctx)
        pytorch.Trainer(warm, ctx).fit(
            max_length=Batch(5), latest_checkpoint=trainer.latest_checkpoint
        )
        first_report = ctx._core.train.reported_metrics("training")[0]
    for a, b in zip(weights, warm.first.at_start, strict=True):
        assert torch.equal(a, b)
    assert warm.seen[0] == (0, 0)  # counters start at 0
    assert len(warm.seen) == 5
    assert first_report["steps_completed"] == 5


def test_it_loads_a_checkpoint_directory_path(tmp_path: pathlib.Path) -> None:
    _, trainer, _ = _fit(tmp_path, 10)
    directory = str(tmp_path / str(trainer.latest_checkpoint))
    resumed, _, _ = _fit(tmp_path, 12, latest=directory)
    assert [b for _, b in resumed.seen] == [10, 11]


def test_it_refuses_a_checkpoint_with_other_objects(tmp_path: pathlib.Path) -> None:
    _, trainer, _ = _fit(tmp_path, 3)

    class TwoModels(ResumeTrial):
        def __init__(self, context: PyTorchTrialContext) -> None:
            super().__init__(context)
            context.wrap_model(nn.Linear(2, 2))

    with (
        pytorch.init(hparams=HPARAMS, checkpoint_storage=str(tmp_path)) as ctx,
        pytest.raises(RuntimeError, match="checkpoint has 1 models but the trial wrapped 2"),
    ):
        pytorch.Trainer(TwoModels(ctx), ctx).fit(
            max_length=Batch(5), latest_checkpoint=trainer.latest_checkpoint
        )


def test_it_loads_a_trial_from_a_checkpoint_outside_the_harness(tmp_path: pathlib.Path) -> None:
    trained, trainer, _ = _fit(tmp_path, 10)
    loaded = pytorch.load_trial_from_checkpoint_path(
        tmp_path / str(trainer.latest_checkpoint), ResumeTrial, hparams=HPARAMS
    )
    assert isinstance(loaded.context, pytorch.CheckpointLoadContext)
    assert not loaded.model.training
    for a, b in zip(_params(trained), _params(loaded), strict=True):
        assert torch.equal(a, b)
