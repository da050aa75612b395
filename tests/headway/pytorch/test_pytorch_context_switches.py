"""Determined's context switches on ``PyTorchTrialContext`` / ``DeepSpeedTrial``:
``get_initial_batch()``, ``experimental.disable_dataset_reproducibility_checks()``,
``experimental.disable_auto_to_device()``, ``wrap_lr_scheduler`` refusing an optimizer that
``wrap_optimizer`` did not return, and ``DeepSpeedTrial.evaluate_full_dataset``."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from headway import core, pytorch
from headway._info import ClusterInfo, TrialInfo
from headway.pytorch import Batch, DataLoader, LRScheduler, PyTorchTrial, PyTorchTrialContext


def numpy_batches(records: list[tuple[torch.Tensor, ...]]) -> dict[str, Any]:
    """A collate function whose batches hold an ndarray: ``to_device`` turns it into a tensor."""
    return {"x": np.stack([r[0].numpy() for r in records])}


class Recorder(PyTorchTrial):
    """Records the type of what ``train_batch`` / ``evaluate_batch`` receive."""

    def __init__(self, context: PyTorchTrialContext, *, auto: bool = True, plain: bool = False):
        self.context = context
        if not auto:
            context.experimental.disable_auto_to_device()
        self.plain = plain
        self.model = context.wrap_model(nn.Linear(2, 1))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.train_types: list[str] = []
        self.eval_types: list[str] = []

    def _loader(self, n: int) -> Any:
        data = torch.utils.data.TensorDataset(torch.arange(2 * n, dtype=torch.float32).view(n, 2))
        cls = torch.utils.data.DataLoader if self.plain else DataLoader
        return cls(data, batch_size=2, collate_fn=numpy_batches)

    def build_training_data_loader(self) -> Any:
        return self._loader(8)

    def build_validation_data_loader(self) -> Any:
        return self._loader(4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.train_types.append(type(batch["x"]).__name__)
        x = self.context.to_device(batch["x"])  # works either way
        loss = self.model(x).pow(2).mean()
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        self.eval_types.append(type(batch["x"]).__name__)
        return {"val": self.model(self.context.to_device(batch["x"])).mean()}


def fit(tmp_path: pathlib.Path, **kwargs: Any) -> Recorder:
    with pytorch.init(hparams={"global_batch_size": 2}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = Recorder(ctx, **kwargs)
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(2), checkpoint_policy="none")
    return trial


def test_batches_reach_the_trial_on_the_device_by_default(tmp_path: pathlib.Path) -> None:
    trial = fit(tmp_path)
    assert set(trial.train_types) == set(trial.eval_types) == {"Tensor"}


def test_disable_auto_to_device_hands_batches_over_as_loaded(tmp_path: pathlib.Path) -> None:
    trial = fit(tmp_path, auto=False)
    assert trial.train_types == ["ndarray", "ndarray"]
    assert set(trial.eval_types) == {"ndarray"}


def test_a_plain_torch_loader_needs_the_reproducibility_checks_disabled(tmp_path) -> None:
    with pytest.raises(TypeError, match=r"build_training_data_loader.*disable_dataset_repro"):
        fit(tmp_path, plain=True)

    with pytorch.init(hparams={"global_batch_size": 2}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = Recorder(ctx, plain=True)
        ctx.experimental.disable_dataset_reproducibility_checks()
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(5), checkpoint_policy="none")
    # 4 batches per epoch: the plain loader ran into a second epoch, and validation ran over it.
    assert len(trial.train_types) == 5 and len(trial.eval_types) == 2


def test_wrap_lr_scheduler_refuses_an_optimizer_wrap_optimizer_did_not_return(tmp_path) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        model = ctx.wrap_model(nn.Linear(1, 1))
        unwrapped = torch.optim.SGD(model.parameters(), lr=1.0)
        with pytest.raises(ValueError, match="optimizer that is returned by wrap_optimizer"):
            ctx.wrap_lr_scheduler(
                torch.optim.lr_scheduler.StepLR(unwrapped, step_size=1),
                LRScheduler.StepMode.STEP_EVERY_EPOCH,
            )
        assert ctx.lr_schedulers == []
        wrapped = ctx.wrap_optimizer(unwrapped)
        scheduler = torch.optim.lr_scheduler.StepLR(wrapped, step_size=1)
        assert ctx.wrap_lr_scheduler(scheduler, LRScheduler.StepMode.STEP_EVERY_EPOCH) is scheduler


def test_get_initial_batch_is_the_resumed_checkpoint_s_steps(tmp_path: pathlib.Path) -> None:
    # Locally, as in Determined: 0.
    with pytorch.init(hparams={}, checkpoint_storage=str(tmp_path)) as ctx:
        assert ctx.get_initial_batch() == 0

    # On the cluster the trial learns its latest checkpoint from ClusterInfo; the checkpoint's
    # metadata says whose it is: its own (a resume) or another trial's (a warm start).
    with core.init(checkpoint_storage=str(tmp_path)) as core_context:
        with core_context.checkpoint.store_path({"steps_completed": 12, "trial_id": 7}) as (
            _path,
            storage_id,
        ):
            pass
        config = {"entrypoint": "python train.py", "searcher": {"name": "single", "metric": "m"}}
        trial = TrialInfo(
            trial_id=7, experiment_id=1, run_id=2, hparams={}, trial_seed=0, config=config
        )
        info = ClusterInfo(master_url="x", token="t", trial=trial, latest_checkpoint=storage_id)
        for trial_id, initial in ((7, 12), (8, 0)):
            core_context.info = info
            context = PyTorchTrialContext(
                core_context,
                hparams={},
                exp_conf={},
                trial_seed=0,
                trial_id=trial_id,
                run_id=2,
            )
            assert context.get_initial_batch() == initial
        core_context.info = dataclasses.replace(info, latest_checkpoint=None)
        fresh = PyTorchTrialContext(
            core_context, hparams={}, exp_conf={}, trial_seed=0, trial_id=7, run_id=1
        )
        assert fresh.get_initial_batch() == 0
        core_context.info = None
