"""Determined 0.38.1 fidelity of the PyTorchTrial loop: gradients and LR schedules.

Each test reproduces what Determined's harness (harness/determined/pytorch/_pytorch_trial.py,
_pytorch_context.py) does for the same trial code: ``backward_passes_per_step``,
``aggregation_frequency``, LR stepping, ``ReduceLROnPlateau``, ``GradScaler.update()``. Hooks,
evaluation and reducers: tests/headway/pytorch/test_pytorch_fidelity_hooks.py; two ranks:
tests/headway/pytorch/test_pytorch_fidelity_ranks.py.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import Any

import pytest
import torch
from torch import nn

from headway import pytorch
from headway.pytorch import Batch, DataLoader, LRScheduler, PyTorchTrial, PyTorchTrialContext


def _loader(values: list[float], batch_size: int = 1) -> DataLoader:
    x = torch.tensor(values).reshape(-1, 1)
    return DataLoader(torch.utils.data.TensorDataset(x), batch_size=batch_size)


class GradTrial(PyTorchTrial):
    """One weight at 0, SGD lr 1, loss = w * x: the weight ends at minus the applied gradients."""

    def __init__(self, context: PyTorchTrialContext, **wrap: Any) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(1, 1, bias=False))
        nn.init.zeros_(self.model.weight)
        self.optimizer = context.wrap_optimizer(
            torch.optim.SGD(self.model.parameters(), lr=1.0), **wrap
        )
        self.data = [1.0, 3.0]
        self.two_losses = False
        self.zero_grads = True

    def build_training_data_loader(self) -> DataLoader:
        return _loader(self.data)

    def build_validation_data_loader(self) -> DataLoader:
        return _loader([0.0])

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
        (x,) = batch
        out = self.model(x).sum()
        self.context.backward(out, retain_graph=self.two_losses)
        if self.two_losses:  # Determined's own example of backward_passes_per_step=2
            self.context.backward(2 * out)
        self.context.step_optimizer(self.optimizer, auto_zero_grads=self.zero_grads)
        return {"out": out}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        return {"zero": 0.0}


def _fit_grad(
    tmp_path: pathlib.Path,
    batches: int,
    *,
    init_kwargs: dict[str, Any] | None = None,
    wrap: dict[str, Any] | None = None,
    two_losses: bool = False,
) -> float:
    kwargs = {"hparams": {"global_batch_size": 1}, **(init_kwargs or {})}
    with pytorch.init(checkpoint_storage=str(tmp_path), **kwargs) as ctx:
        trial = GradTrial(ctx, **(wrap or {}))
        trial.two_losses = two_losses
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(batches), checkpoint_policy="none")
    return float(trial.model.weight.item())


# -- 1. backward_passes_per_step / aggregation_frequency ---------------------------------------


def test_backward_passes_per_step_sums_passes_within_a_batch_and_steps_every_batch(
    tmp_path: pathlib.Path,
) -> None:
    # Determined (torch DDP backend): the optimizer steps on every step_optimizer call; the two
    # backward passes of one batch add up (x + 2x). Batches x=1, x=3 -> w = -(3*1) - (3*3).
    w = _fit_grad(tmp_path, 2, wrap={"backward_passes_per_step": 2}, two_losses=True)
    assert w == pytest.approx(-12.0)


@pytest.mark.parametrize(
    ("init_kwargs", "wrap", "expected"),
    [
        ({"aggregation_frequency": 2}, {}, -2.0),  # (1 + 3) / 2
        ({"aggregation_frequency": 2}, {"average_aggregated_gradients": False}, -4.0),
        ({"exp_conf": {"optimizations": {"aggregation_frequency": 2}}}, {}, -2.0),
        (
            {
                "exp_conf": {
                    "optimizations": {
                        "aggregation_frequency": 2,
                        "average_aggregated_gradients": False,
                    }
                }
            },
            {},
            -4.0,
        ),
        # init()'s argument wins over the config, as Determined's Trainer API takes it there.
        (
            {
                "aggregation_frequency": 1,
                "exp_conf": {"optimizations": {"aggregation_frequency": 2}},
            },
            {},
            -4.0,
        ),
    ],
)
def test_aggregation_frequency_accumulates_across_batches(
    tmp_path: pathlib.Path, init_kwargs: dict[str, Any], wrap: dict[str, Any], expected: float
) -> None:
    assert _fit_grad(tmp_path, 2, init_kwargs=init_kwargs, wrap=wrap) == pytest.approx(expected)


def test_aggregation_frequency_steps_only_at_the_end_of_a_window(tmp_path: pathlib.Path) -> None:
    # 3 batches with a window of 2: batch 3's gradient is never applied (zeroed by nobody yet).
    with pytorch.init(
        hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path), aggregation_frequency=2
    ) as ctx:
        trial = GradTrial(ctx)
        trial.data = [1.0, 3.0, 5.0]
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(3), checkpoint_policy="none")
        assert trial.model.weight.item() == pytest.approx(-2.0)
        assert trial.model.weight.grad is not None and trial.model.weight.grad.item() == 5.0


def test_aggregation_frequency_needs_auto_zero_grads(tmp_path: pathlib.Path) -> None:
    with pytorch.init(
        hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path), aggregation_frequency=2
    ) as ctx:
        trial = GradTrial(ctx)
        trial.zero_grads = False
        with pytest.raises(ValueError, match="auto_zero_grads"):
            pytorch.Trainer(trial, ctx).fit(max_length=Batch(2), checkpoint_policy="none")


def test_wrap_optimizer_rejects_bad_backward_passes(tmp_path: pathlib.Path) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        model = ctx.wrap_model(nn.Linear(1, 1))
        with pytest.raises(ValueError, match="backward_passes_per_step"):
            ctx.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=1.0), 0)
    with (
        pytest.raises(ValueError, match="aggregation_frequency"),
        pytorch.init(checkpoint_storage=str(tmp_path), aggregation_frequency=0),
    ):
        pass


class SchedTrial(PyTorchTrial):
    """Records the LR each batch sees; 3 batches per epoch."""

    def __init__(self, context: PyTorchTrialContext, mode: str) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(1, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=1.0))
        context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.5),
            step_mode=LRScheduler.StepMode[mode],
        )
        self.lrs: list[float] = []

    def build_training_data_loader(self) -> DataLoader:
        return _loader([1.0] * 6, batch_size=2)

    def build_validation_data_loader(self) -> DataLoader:
        return _loader([1.0])

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.lrs.append(self.optimizer.param_groups[0]["lr"])
        (x,) = batch
        self.context.backward(self.model(x).sum())
        self.context.step_optimizer(self.optimizer)
        return {}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        return {"zero": 0.0}


@pytest.mark.parametrize(
    ("mode", "agg", "expected"),
    [
        # Determined's _auto_step_lr_scheduler_per_batch: nothing steps between optimizer steps;
        # per-batch steps of a window are made together at its end.
        ("STEP_EVERY_BATCH", 2, [1, 1, 0.25, 0.25, 0.0625, 0.0625, 0.015625, 0.015625]),
        ("STEP_EVERY_OPTIMIZER_STEP", 2, [1, 1, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125]),
        ("STEP_EVERY_OPTIMIZER_STEP", 1, [1, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 2**-7]),
        # Epoch step when the next optimizer step falls in the next epoch (batches 1 and 5).
        ("STEP_EVERY_EPOCH", 2, [1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25]),
        ("STEP_EVERY_EPOCH", 1, [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25]),
    ],
)
def test_lr_schedulers_follow_optimizer_steps(
    tmp_path: pathlib.Path, mode: str, agg: int, expected: list[float]
) -> None:
    with pytorch.init(
        hparams={"global_batch_size": 2},
        checkpoint_storage=str(tmp_path),
        aggregation_frequency=agg,
    ) as ctx:
        trial = SchedTrial(ctx, mode)
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(8), checkpoint_policy="none")
    assert trial.lrs == pytest.approx(expected)


# -- 5. ReduceLROnPlateau ----------------------------------------------------------------------


def test_reduce_lr_on_plateau_needs_manual_step(tmp_path: pathlib.Path) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        model = ctx.wrap_model(nn.Linear(1, 1))
        opt = ctx.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=1.0))
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        for mode in ("STEP_EVERY_EPOCH", "STEP_EVERY_BATCH", "STEP_EVERY_OPTIMIZER_STEP"):
            with pytest.raises(ValueError, match=r"ReduceLROnPlateau.*MANUAL_STEP"):
                ctx.wrap_lr_scheduler(plateau, LRScheduler.StepMode[mode])
        assert ctx.wrap_lr_scheduler(plateau, LRScheduler.StepMode.MANUAL_STEP) is plateau
        assert len(ctx.lr_schedulers) == 1


# -- GradScaler: Determined leaves update() to the trial -----------------------------------------


class ScalerTrial(GradTrial):
    def __init__(self, context: PyTorchTrialContext, user_updates: bool) -> None:
        super().__init__(context)
        self.scaler = context.wrap_scaler(torch.amp.GradScaler("cpu", growth_interval=1))
        self.user_updates = user_updates

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
        (x,) = batch
        loss = self.model(x).sum()
        self.context.backward(self.scaler.scale(loss))
        self.scaler.unscale_(self.optimizer)  # a Determined trial may unscale before clipping
        self.context.step_optimizer(
            self.optimizer,
            clip_grads=lambda ps: torch.nn.utils.clip_grad_norm_(ps, 100.0),
            scaler=self.scaler,
        )
        if self.user_updates:
            self.scaler.update()
        return {"loss": loss}


@pytest.mark.parametrize("user_updates", [True, False])
def test_grad_scaler_is_updated_once_per_batch(tmp_path: pathlib.Path, user_updates: bool) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = ScalerTrial(ctx, user_updates)
        start = trial.scaler.get_scale()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            pytorch.Trainer(trial, ctx).fit(max_length=Batch(2), checkpoint_policy="none")
    assert trial.scaler.get_scale() == start * 4  # growth_interval=1: doubled by each update
    assert trial.model.weight.item() == pytest.approx(-4.0)


# -- optimizations in the experiment config ----------------------------------------------------


def test_optimizations_config_fields() -> None:
    from headway.expconf import ConfigError, parse_experiment_config

    base = {
        "entrypoint": "model_def:T",
        "searcher": {"name": "single", "metric": "loss", "max_length": 10},
    }
    cfg = parse_experiment_config(
        {
            **base,
            "optimizations": {"aggregation_frequency": 4, "average_aggregated_gradients": False},
        }
    )
    assert cfg.to_dict()["optimizations"] == {
        "aggregation_frequency": 4,
        "average_aggregated_gradients": False,
    }
    assert parse_experiment_config(base).optimizations.aggregation_frequency == 1
    with pytest.raises(ConfigError, match="aggregation_frequency"):
        parse_experiment_config({**base, "optimizations": {"aggregation_frequency": 0}})
    with pytest.raises(ConfigError, match="gradient_compression"):
        parse_experiment_config({**base, "optimizations": {"gradient_compression": True}})
