"""``pytorch.init()`` / ``core.init()`` without ``distributed=`` join the launcher's ranks.

Under ``python -m headway.launch.torch_distributed`` each rank used to train
the whole data set alone, report as the chief and register its own checkpoints. These tests run
the real launcher (torchrun, 2 ranks, gloo on the CPU) in local mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import REPO

TRAINER = """
import gc, json, sys
import torch
import torch.distributed as dist
from headway import pytorch
from headway.pytorch import Batch, DataLoader, PyTorchTrial

class Trial(PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(1, 1))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))
        self.seen = []

    def build_training_data_loader(self):
        ids = torch.arange(16, dtype=torch.float32).reshape(16, 1)
        bs = self.context.get_per_slot_batch_size()
        return DataLoader(torch.utils.data.TensorDataset(ids), batch_size=bs)

    def build_validation_data_loader(self):
        x = torch.ones(4, 1)
        return DataLoader(torch.utils.data.TensorDataset(x), batch_size=2)

    def train_batch(self, batch, epoch_idx, batch_idx):
        (x,) = batch
        self.seen += [int(v) for v in x.flatten()]
        loss = self.model(x).pow(2).mean()
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch):
        (x,) = batch
        return {"val_loss": self.model(x).pow(2).mean()}

with pytorch.init(hparams={"global_batch_size": 4}, checkpoint_storage=sys.argv[1]) as ctx:
    grouped = dist.is_initialized() and dist.get_world_size()
    trial = Trial(ctx)
    pytorch.Trainer(trial, ctx).fit(
        max_length=Batch(4), checkpoint_period=Batch(2), validation_period=Batch(2),
        checkpoint_policy="none",
    )
    reported = {
        g: [r["steps_completed"] for r in ctx._core.train.reported_metrics(g)]
        for g in ("training", "validation")
    }
    out = {
        "rank": ctx.distributed.rank, "size": ctx.distributed.size, "group": grouped,
        "seen": trial.seen, "reported": reported,
        "weight": trial.model.module.weight.item() if grouped else None,
    }
out["group_after"] = dist.is_initialized()
print(json.dumps(out), flush=True)
# Free the DDP model before the interpreter exits, as docs/distributed.md asks: torch's gloo
# teardown at exit aborts a rank now and then otherwise.
del trial
gc.collect()
"""

CORE = """
import json
from headway import core

with core.init(checkpoint_storage="store") as ctx:
    d = ctx.distributed
    out = {"rank": d.rank, "size": d.size, "allgather": d.allgather(d.rank * 10)}
print(json.dumps(out), flush=True)
"""


def launch(tmp_path: Path, script: str, *args: str) -> dict[int, dict]:
    """Run ``script`` under the launcher with 2 CPU slots; each rank's last JSON line."""
    (tmp_path / "script.py").write_text(textwrap.dedent(script))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "HEADWAY_CLUSTER_INFO")
    }
    env.update(HEADWAY_SLOT_IDS="cpu0,cpu1", HEADWAY_THREADS_PER_SLOT="1", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "headway.launch.torch_distributed", "python", "script.py", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results: dict[int, dict] = {}
    for line in done.stdout.splitlines():
        head, sep, body = line.partition("] || ")
        if sep and head.startswith("[rank=") and body.startswith("{"):
            results[int(head.removeprefix("[rank="))] = json.loads(body)
    assert sorted(results) == [0, 1], done.stdout[-3000:]
    return results


@pytest.mark.slow
def test_pytorch_init_joins_the_launcher_s_ranks_as_one_group(tmp_path: Path) -> None:
    store = tmp_path / "store"
    results = launch(tmp_path, TRAINER, str(store))
    r0, r1 = results[0], results[1]
    # One process group of world size 2, created by init() and destroyed when it exits.
    assert (r0["rank"], r1["rank"]) == (0, 1)
    assert r0["size"] == r1["size"] == 2 and r0["group"] == r1["group"] == 2
    assert r0["group_after"] is False and r1["group_after"] is False
    # Data sharded: 4 batches of 2 records per rank, disjoint, together the 16 records once.
    assert len(r0["seen"]) == len(r1["seen"]) == 8
    assert sorted(r0["seen"] + r1["seen"]) == list(range(16))
    # DDP kept the replicas equal.
    assert r0["weight"] == pytest.approx(r1["weight"])
    # Only the chief reports; one checkpoint per checkpoint step (2 and 4), not one per rank.
    assert r0["reported"]["validation"] == [2, 4] and r0["reported"]["training"]
    assert r1["reported"] == {"training": [], "validation": []}
    # Checkpoint folders (their storage markers lie beside them as dot-files).
    checkpoints = [d for d in store.iterdir() if d.is_dir()]
    steps = sorted(
        json.loads((d / "metadata.json").read_text())["steps_completed"] for d in checkpoints
    )
    assert steps == [2, 4]


@pytest.mark.slow
def test_core_init_joins_the_launcher_s_ranks(tmp_path: Path) -> None:
    results = launch(tmp_path, CORE)
    for rank, result in results.items():
        assert result == {"rank": rank, "size": 2, "allgather": [0, 10]}


def test_core_init_refuses_several_slots_without_a_launcher(tmp_path: Path, monkeypatch) -> None:
    from headway import core

    info = {
        "master_url": "http://127.0.0.1:9",
        "token": "t",
        "experiment_id": 1,
        "trial_id": 1,
        "run_id": 1,
        "experiment_config": {
            "entrypoint": "python train.py",
            "searcher": {"name": "single", "metric": "loss"},
            "checkpoint_storage": {"type": "shared_fs", "host_path": "/x"},
        },
    }
    (tmp_path / "info.json").write_text(json.dumps(info))
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(tmp_path / "info.json"))
    monkeypatch.setenv("HEADWAY_SLOT_IDS", "cpu0,cpu1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ValueError, match=r"2 slots .* headway\.launch\.torch_distributed"):
        core.init()
