"""LR scheduler step modes and optimizer stepping of PyTorchTrialContext."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import torch
from torch import nn

from headway import pytorch
from headway.pytorch import Batch, DataLoader, LRScheduler, PyTorchTrial, PyTorchTrialContext


class SchedTrial(PyTorchTrial):
    """Records the LR seen by each batch; the step mode comes from the hparams."""

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 1))
        self.optimizer = context.wrap_optimizer(
            torch.optim.SGD(self.model.parameters(), lr=1.0),
            backward_passes_per_step=context.get_hparam("passes"),
        )
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.5),
            step_mode=LRScheduler.StepMode[context.get_hparam("mode")],
            frequency=context.get_hparam("frequency"),
        )
        self.lrs: list[float] = []
        self.steps = 0

    def build_training_data_loader(self) -> DataLoader:
        x = torch.ones(8, 2)  # batch size 2: 4 batches per epoch
        return DataLoader(torch.utils.data.TensorDataset(x, x[:, :1]), batch_size=2)

    def build_validation_data_loader(self) -> DataLoader:
        return self.build_training_data_loader()

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.lrs.append(self.optimizer.param_groups[0]["lr"])
        x, y = batch
        self.context.backward(nn.functional.mse_loss(self.model(x), y))
        before = self.model.weight.detach().clone()
        self.context.step_optimizer(self.optimizer)
        self.steps += int(not torch.equal(before, self.model.weight))
        if self.context.get_hparam("mode") == "MANUAL_STEP" and batch_idx == 2:
            self.scheduler.step()
        return {}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        return {"zero": 0.0}


def _lrs(tmp_path: pathlib.Path, mode: str, frequency: int = 1, passes: int = 1) -> SchedTrial:
    hparams = {"global_batch_size": 2, "mode": mode, "frequency": frequency, "passes": passes}
    with pytorch.init(hparams=hparams, checkpoint_storage=str(tmp_path)) as ctx:
        trial = SchedTrial(ctx)
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(8), checkpoint_policy="none")
    return trial


@pytest.mark.parametrize(
    ("mode", "frequency", "passes", "expected"),
    [
        ("STEP_EVERY_BATCH", 1, 1, [1, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125]),
        ("STEP_EVERY_BATCH", 3, 1, [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25]),
        ("STEP_EVERY_EPOCH", 1, 1, [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5]),
        ("MANUAL_STEP", 1, 1, [1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5]),
        # backward_passes_per_step does not change when the optimizer steps (Determined).
        ("STEP_EVERY_OPTIMIZER_STEP", 2, 2, [1, 1, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125]),
    ],
)
def test_step_modes(
    tmp_path: pathlib.Path, mode: str, frequency: int, passes: int, expected: list[float]
) -> None:
    trial = _lrs(tmp_path, mode, frequency, passes)
    assert trial.lrs == expected
    assert trial.steps == 8


def test_it_rejects_a_bad_step_mode() -> None:
    with pytest.raises(ValueError, match="step_mode"):
        LRScheduler(object(), "every batch")  # type: ignore[arg-type]


def test_step_optimizer_needs_a_wrapped_optimizer(tmp_path: pathlib.Path) -> None:
    with pytorch.init(hparams={"global_batch_size": 2}, checkpoint_storage=str(tmp_path)) as ctx:
        opt = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
        with pytest.raises(ValueError, match="wrap_optimizer"):
            ctx.step_optimizer(opt)


def test_context_config_accessors(tmp_path: pathlib.Path) -> None:
    with pytorch.init(
        hparams={"global_batch_size": 8, "lr": 0.1},
        exp_conf={"data": {"x": 1}},
        checkpoint_storage=str(tmp_path),
        local_trial_id=4,
    ) as ctx:
        assert ctx.get_hparam("lr") == 0.1
        assert ctx.get_hparams()["global_batch_size"] == 8
        assert ctx.get_per_slot_batch_size() == 8 and ctx.get_global_batch_size() == 8
        assert ctx.get_data_config() == {"x": 1}
        assert ctx.get_trial_id() == 4
        assert ctx.device == torch.device("cpu") or ctx.device.type == "cuda"
        with pytest.raises(ValueError, match="'momentum'"):
            ctx.get_hparam("momentum")
    with (
        pytorch.init(hparams={}, checkpoint_storage=str(tmp_path)) as ctx,
        pytest.raises(ValueError, match="global_batch_size"),
    ):
        ctx.get_per_slot_batch_size()


class AccumulateTrial(PyTorchTrial):
    """One weight, loss = w * x: each batch's gradient is x; aggregation_frequency 2."""

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(1, 1, bias=False))
        nn.init.zeros_(self.model.weight)
        self.optimizer = context.wrap_optimizer(
            torch.optim.SGD(self.model.parameters(), lr=1.0),
            average_aggregated_gradients=context.get_hparam("average"),
        )

    def build_training_data_loader(self) -> DataLoader:
        x = torch.tensor([[1.0], [3.0]])  # batch size 1: gradients 1 then 3
        return DataLoader(torch.utils.data.TensorDataset(x), batch_size=1)

    def build_validation_data_loader(self) -> DataLoader:
        return self.build_training_data_loader()

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        (x,) = batch
        self.context.backward(self.model(x).sum())
        self.context.step_optimizer(self.optimizer)
        return {}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        return {"zero": 0.0}


@pytest.mark.parametrize(("average", "expected_weight"), [(True, -2.0), (False, -4.0)])
def test_aggregated_gradients_are_averaged_or_summed(
    tmp_path: pathlib.Path, average: bool, expected_weight: float
) -> None:
    hparams = {"global_batch_size": 1, "average": average}
    with pytorch.init(
        hparams=hparams, checkpoint_storage=str(tmp_path), aggregation_frequency=2
    ) as ctx:
        trial = AccumulateTrial(ctx)
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(2), checkpoint_policy="none")
    assert trial.model.weight.item() == pytest.approx(expected_weight)


def test_unsupported_determined_options_are_refused_by_name(tmp_path: pathlib.Path) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        model = ctx.wrap_model(nn.Linear(1, 1))
        with pytest.raises(ValueError, match="fp16_compression"):
            ctx.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=1.0), fp16_compression=True)
