"""The harness loop: validation/checkpoint periods, preemption, early stop, callbacks."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import torch
from torch import nn

from headway import pytorch
from headway.pytorch import Batch, DataLoader, Epoch, PyTorchTrial, PyTorchTrialContext

N = 100  # batch size 10 -> 10 batches per epoch


class _Events(pytorch.PyTorchCallback):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        self.events.append(("epoch_start", epoch_idx))

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        self.events.append(("epoch_end", epoch_idx))

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.events.append(("validation", round(metrics["validation_error"], 6)))

    def on_trial_shutdown(self) -> None:
        self.events.append(("shutdown", None))


class LinearTrial(PyTorchTrial):
    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(4, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), 0.05))
        self.callback = _Events()
        self.stop_after: int | None = None
        self.flags: list[tuple[bool, bool]] = []

    def build_training_data_loader(self) -> DataLoader:
        x = torch.arange(N * 4, dtype=torch.float32).reshape(N, 4) / (N * 4)
        return DataLoader(
            torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)),
            batch_size=self.context.get_per_slot_batch_size(),
        )

    def build_validation_data_loader(self) -> DataLoader:
        x = torch.ones(25, 4)
        return DataLoader(torch.utils.data.TensorDataset(x, 4 * x[:, :1]), batch_size=10)

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        return {"events": self.callback}

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.flags.append((self.context.is_epoch_start(), self.context.is_epoch_end()))
        x, y = batch
        loss = nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        if self.stop_after is not None and batch_idx + 1 == self.stop_after:
            self.context.set_stop_requested(True)
        return {"loss": loss, "batch_idx": batch_idx}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        return {"validation_error": (self.model(x) - y).abs().mean(), "n": len(x)}


class _FakePreempt:
    """Says "preempt" from the k-th batch boundary on; records acknowledgements."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.calls = 0
        self.acknowledged = 0

    def should_preempt(self, auto_ack: bool = True) -> bool:
        self.calls += 1
        return self.calls >= self.after

    def acknowledge_preemption_signal(self) -> None:
        self.acknowledged += 1


def _run(
    tmp_path: pathlib.Path,
    preempt: _FakePreempt | None = None,
    stop_after: int | None = None,
    **fit_kwargs: Any,
) -> tuple[LinearTrial, pytorch.Trainer, dict[str, list[Any]]]:
    with pytorch.init(hparams={"global_batch_size": 10}, checkpoint_storage=str(tmp_path)) as ctx:
        if preempt is not None:
            # Only the signal is faked; the rest of the Core API context is the real local one.
            ctx._core.preempt.should_preempt = preempt.should_preempt
            ctx._core.preempt.acknowledge_preemption_signal = preempt.acknowledge_preemption_signal
        trial = LinearTrial(ctx)
        trial.stop_after = stop_after
        trainer = pytorch.Trainer(trial, ctx)
        trainer.fit(**fit_kwargs)
        reports = {
            g: [(r["steps_completed"], r["metrics"]) for r in ctx._core.train.reported_metrics(g)]
            for g in ("training", "validation")
        }
    return trial, trainer, reports


def _checkpoint_steps(tmp_path: pathlib.Path) -> list[int]:
    import json

    return sorted(
        json.loads(p.read_text())["steps_completed"] for p in tmp_path.glob("*/metadata.json")
    )


def test_it_validates_every_period_and_at_the_end(tmp_path: pathlib.Path) -> None:
    _, _, reports = _run(
        tmp_path, max_length=Batch(35), validation_period=Batch(10), checkpoint_policy="none"
    )
    assert [s for s, _ in reports["validation"]] == [10, 20, 30, 35]
    assert _checkpoint_steps(tmp_path) == [35]


def test_it_counts_epoch_periods_in_batches_of_the_loader(tmp_path: pathlib.Path) -> None:
    trial, _, reports = _run(
        tmp_path,
        max_length=Epoch(3),
        validation_period=Epoch(1),
        checkpoint_period=Epoch(2),
        checkpoint_policy="none",
    )
    assert [s for s, _ in reports["validation"]] == [10, 20, 30]
    assert _checkpoint_steps(tmp_path) == [20, 30]
    assert trial.callback.events[:3] == [
        ("epoch_start", 0),
        ("epoch_end", 0),
        ("validation", trial.callback.events[2][1]),
    ]
    assert trial.flags[0] == (True, False) and trial.flags[9] == (False, True)


def test_it_averages_training_metrics_over_each_reporting_period(tmp_path: pathlib.Path) -> None:
    _, _, reports = _run(tmp_path, max_length=Batch(12), reporting_period=Batch(5))
    assert [s for s, _ in reports["training"]] == [5, 10, 12]
    assert reports["training"][0][1]["batch_idx"] == pytest.approx(2.0)  # mean of 0..4
    assert reports["training"][2][1]["batch_idx"] == pytest.approx(10.5)  # mean of 10, 11
    assert isinstance(reports["training"][0][1]["loss"], float)


def test_it_weights_validation_metrics_by_batch_length(tmp_path: pathlib.Path) -> None:
    _, _, reports = _run(tmp_path, max_length=Batch(1))
    ((_, metrics),) = reports["validation"]
    assert metrics["n"] == pytest.approx((10 * 10 + 10 * 10 + 5 * 5) / 25)


def test_it_checkpoints_and_acknowledges_on_preemption(tmp_path: pathlib.Path) -> None:
    preempt = _FakePreempt(after=7)
    trial, trainer, reports = _run(
        tmp_path,
        preempt=preempt,
        max_length=Batch(30),
        validation_period=Batch(5),
        checkpoint_policy="none",
    )
    assert len(trial.flags) == 7
    assert preempt.acknowledged == 1
    assert _checkpoint_steps(tmp_path) == [7]
    assert [s for s, _ in reports["validation"]] == [5]  # no validation on the way out
    assert reports["training"][-1][0] == 7
    assert trial.callback.events[-1] == ("shutdown", None)

    resumed, _, reports = _run(
        tmp_path,
        max_length=Batch(30),
        latest_checkpoint=trainer.latest_checkpoint,
        checkpoint_policy="none",
        reporting_period=Batch(5),
    )
    assert len(resumed.flags) == 23
    assert reports["training"][0][0] == 10  # reporting stays aligned with the trial's steps


def test_it_stops_early_when_the_trial_asks(tmp_path: pathlib.Path) -> None:
    trial, _, reports = _run(tmp_path, stop_after=4, max_length=Batch(30))
    assert len(trial.flags) == 4
    assert [s for s, _ in reports["validation"]] == [4]
    assert _checkpoint_steps(tmp_path) == [4]


def test_test_mode_trains_one_batch_validates_and_checkpoints(tmp_path: pathlib.Path) -> None:
    trial, _, reports = _run(tmp_path, test_mode=True)
    assert len(trial.flags) == 1
    assert [s for s, _ in reports["validation"]] == [1]
    assert _checkpoint_steps(tmp_path) == [1]


def test_it_checkpoints_on_best_validation_by_default(tmp_path: pathlib.Path) -> None:
    conf = {"searcher": {"metric": "validation_error", "smaller_is_better": True}}
    with pytorch.init(
        hparams={"global_batch_size": 10}, exp_conf=conf, checkpoint_storage=str(tmp_path)
    ) as ctx:
        pytorch.Trainer(LinearTrial(ctx), ctx).fit(max_length=Batch(20), validation_period=Batch(5))
        errors = [
            r["metrics"]["validation_error"] for r in ctx._core.train.reported_metrics("validation")
        ]
    improving = [5 * (i + 1) for i, e in enumerate(errors) if e == min(errors[: i + 1])]
    assert _checkpoint_steps(tmp_path) == sorted(set(improving) | {20})


def test_it_requires_a_length_locally(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="max_length"):
        _run(tmp_path)


def test_step_zero_validation(tmp_path: pathlib.Path) -> None:
    _, _, reports = _run(tmp_path, max_length=Batch(2), step_zero_validation=True)
    assert [s for s, _ in reports["validation"]] == [0, 2]


def test_on_the_cluster_the_config_and_searcher_decide(tmp_path: pathlib.Path) -> None:
    import json

    from headway import core
    from headway._info import ClusterInfo, TrialInfo

    conf = {
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "validation_error", "max_length": {"epochs": 2}},
        "min_validation_period": {"batches": 5},
        "min_checkpoint_period": {"epochs": 1},
        "scheduling_unit": 4,
    }
    hparams = {"global_batch_size": 10}
    info = ClusterInfo(
        master_url="http://registry.invalid",
        token="t",
        trial=TrialInfo(
            trial_id=9, experiment_id=1, run_id=2, hparams=hparams, trial_seed=3, config=conf
        ),
        latest_checkpoint=None,
    )
    # The real local Core API context (no server), presented as a managed one.
    with core.init(
        checkpoint_storage=str(tmp_path), max_length=conf["searcher"]["max_length"]
    ) as cc:
        cc.info = info
        ctx = PyTorchTrialContext(
            cc, hparams=hparams, exp_conf=conf, trial_seed=3, trial_id=9, run_id=2
        )
        trial = LinearTrial(ctx)
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(3), checkpoint_policy="none")
        training = [r["steps_completed"] for r in cc.train.reported_metrics("training")]
        validation = [r["steps_completed"] for r in cc.train.reported_metrics("validation")]
    assert len(trial.flags) == 20  # 2 epochs of 10 batches; fit's max_length was ignored
    assert training == [4, 8, 12, 16, 20]
    assert validation == [5, 10, 15, 20]
    assert _checkpoint_steps(tmp_path) == [10, 20]
    metadata = [json.loads(p.read_text()) for p in tmp_path.glob("*/metadata.json")]
    assert {(m["trial_id"], m["run_id"]) for m in metadata} == {(9, 2)}
