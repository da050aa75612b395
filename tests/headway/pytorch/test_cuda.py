"""The CUDA paths of the harness: device placement, AMP, exact resume, loading onto the CPU.

Runs only where a GPU is present (a GPU host, not CI's machines); docs/performance.md records the
last run on one. Nothing here needs a registry: the harness runs in local mode.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import torch
from torch import nn

from headway import core, pytorch
from headway.pytorch import Batch, DataLoader, PyTorchTrial, PyTorchTrialContext

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


class CudaTrial(PyTorchTrial):
    """An MLP with dropout and AMP (GradScaler) on a fixed random data set."""

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(
            nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 2))
        )
        self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), 1e-2))
        self.scaler = context.wrap_scaler(torch.amp.GradScaler("cuda"))
        self.devices: set[str] = set()

    def _data(self) -> torch.utils.data.TensorDataset:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(256, 16, generator=gen)
        return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(self._data(), batch_size=16, shuffle=True)

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(self._data(), batch_size=64)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        self.devices.add(str(x.device.type))
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(self.scaler.scale(loss))
        # The harness calls scaler.update() after every batch (as Determined does).
        self.context.step_optimizer(self.optimizer, scaler=self.scaler)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        x, y = batch
        return {"validation_accuracy": (self.model(x).argmax(1) == y).float().mean()}


def _fit(storage: pathlib.Path, length: int, latest: str | None = None) -> tuple[CudaTrial, Any]:
    hparams = {"global_batch_size": 16}
    with pytorch.init(hparams=hparams, checkpoint_storage=str(storage), trial_seed=3) as ctx:
        trial = CudaTrial(ctx)
        trainer = pytorch.Trainer(trial, ctx)
        trainer.fit(max_length=Batch(length), latest_checkpoint=latest, checkpoint_policy="none")
    return trial, trainer


def test_batches_and_models_live_on_the_gpu(tmp_path: pathlib.Path) -> None:
    trial, trainer = _fit(tmp_path, 8)
    assert trial.devices == {"cuda"}
    assert all(p.device.type == "cuda" for p in trial.model.parameters())
    assert trainer.latest_checkpoint is not None


def test_a_resumed_gpu_run_matches_an_uninterrupted_one(tmp_path: pathlib.Path) -> None:
    whole, _ = _fit(tmp_path / "whole", 30)
    _, first = _fit(tmp_path / "split", 13)
    resumed, _ = _fit(tmp_path / "split", 30, latest=first.latest_checkpoint)
    for a, b in zip(whole.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert whole.scaler.get_scale() == resumed.scaler.get_scale()


def test_a_gpu_checkpoint_loads_onto_the_cpu(tmp_path: pathlib.Path) -> None:
    trial, trainer = _fit(tmp_path, 10)
    loaded = pytorch.load_trial_from_checkpoint_path(
        str(tmp_path / str(trainer.latest_checkpoint)),
        trial_class=CudaTrial,
        hparams={"global_batch_size": 16},
        device=torch.device("cpu"),
    )
    for gpu, cpu in zip(trial.model.parameters(), loaded.model.parameters(), strict=True):
        assert cpu.device.type == "cpu" and torch.equal(gpu.cpu(), cpu)


def test_nccl_collectives_work_in_a_single_rank_group(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.distributed as dist

    for var, value in {"RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0, "LOCAL_WORLD_SIZE": 1}.items():
        monkeypatch.setenv(var, str(value))
    monkeypatch.setenv("GROUP_RANK", "0")
    torch.cuda.set_device(0)
    dist.init_process_group(
        "nccl", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        distributed = core.DistributedContext.from_torch_distributed()
        assert distributed.allgather({"rank": distributed.rank}) == [{"rank": 0}]
        assert distributed.broadcast("chief") == "chief"
        distributed.barrier()
    finally:
        dist.destroy_process_group()
