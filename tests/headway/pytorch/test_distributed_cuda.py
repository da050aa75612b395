"""The NCCL path of distributed trials: two ranks under the launcher, one GPU each.

Runs only where at least two CUDA devices are visible (a GPU host, not CI's machines); nothing
here needs a registry: the harness runs in local mode. On such a host also run
``.venv/bin/python bench/ddp_overhead.py --backend nccl`` and record its figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(
        torch.cuda.device_count() < 2, reason="needs two CUDA devices (one per rank)"
    ),
]

MODEL_DEF = """
import json, os
import torch
import torch.distributed as dist
from torch import nn
from headway import pytorch

class GpuTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2)))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        gathered = context.distributed.allgather(str(context.device))
        print(json.dumps({
            "rank": context.distributed.rank,
            "backend": dist.get_backend(),
            "device": str(context.device),
            "current": torch.cuda.current_device(),
            "ddp": type(self.model).__name__,
            "devices": gathered,
        }), flush=True)

    def _data(self):
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(512, 16, generator=gen)
        return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())

    def build_training_data_loader(self):
        return pytorch.DataLoader(self._data(), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return pytorch.DataLoader(self._data(), batch_size=128)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch):
        x, y = batch
        accuracy = (self.model(x).argmax(1) == y).float().mean()
        return {"validation_accuracy": accuracy}
"""

CONFIG = """
hyperparameters: {global_batch_size: 64}
searcher: {name: single, metric: validation_accuracy, smaller_is_better: false,
           max_length: {batches: 40}}
"""


def test_two_ranks_use_nccl_and_one_gpu_each(tmp_path: Path) -> None:
    (tmp_path / "model_def.py").write_text(textwrap.dedent(MODEL_DEF))
    (tmp_path / "exp.yaml").write_text(CONFIG)
    env = dict(os.environ, HEADWAY_SLOT_IDS="0,1")
    env.pop("HEADWAY_CLUSTER_INFO", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "headway.launch.torch_distributed",
            "--",
            "python",
            "-m",
            "headway.exec.harness",
            "model_def:GpuTrial",
            "--config",
            "exp.yaml",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    seen = []
    for line in done.stdout.splitlines():
        _, sep, body = line.partition("] || ")
        if sep and body.startswith("{") and '"backend"' in body:
            seen.append(json.loads(body))
    assert sorted(s["rank"] for s in seen) == [0, 1]
    for item in seen:
        assert item["backend"] == "nccl" and item["ddp"] == "DistributedDataParallel"
        assert item["device"] == f"cuda:{item['rank']}" and item["current"] == item["rank"]
        assert item["devices"] == ["cuda:0", "cuda:1"]
