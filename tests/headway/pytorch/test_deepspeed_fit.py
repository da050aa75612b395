"""DeepSpeedTrial under the harness: gradient accumulation, exact resume, 2 ranks (ZeRO-1).

The trial is written into the test's folder as ``tiny_ds.py`` (a model definition of its own):
a small MLP with dropout on 44 random records, 4 per micro-batch, 2 micro-batches per batch,
so an epoch is 11 micro-batches = 5 batches and the data iterator runs across epoch ends.
DeepSpeed runs on its CPU accelerator with gloo and torch's Adam (nothing is compiled).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("deepspeed")

from headway import pytorch
from headway.pytorch import deepspeed as hw_ds
from tests.helpers import REPO

pytestmark = pytest.mark.slow  # DeepSpeed engines take seconds to build

TRIAL_SOURCE = textwrap.dedent(
    '''
    import deepspeed
    import torch
    from torch import nn

    from headway.pytorch import DataLoader
    from headway.pytorch.deepspeed import DeepSpeedTrial

    CONFIG = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 2,
        "optimizer": {
            "type": "Adam", "params": {"lr": 0.01, "torch_adam": True, "adam_w_mode": False}
        },
        "zero_optimization": {"stage": 1},
        "steps_per_print": 1000000,
    }


    def dataset(n=44):
        gen = torch.Generator().manual_seed(7)
        x = torch.randn(n, 6, generator=gen)
        return torch.utils.data.TensorDataset(x, (x.sum(dim=1) > 0).long())


    class TinyTrial(DeepSpeedTrial):
        def __init__(self, context):
            self.context = context
            model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
            engine, _, _, _ = deepspeed.initialize(
                model=model, model_parameters=model.parameters(), config=dict(CONFIG)
            )
            self.engine = context.wrap_model_engine(engine)
            self.calls = []

        def build_training_data_loader(self):
            return DataLoader(
                dataset(), batch_size=self.context.get_train_micro_batch_size_per_gpu(),
                shuffle=True,
            )

        def build_validation_data_loader(self):
            return DataLoader(dataset(10), batch_size=4)

        def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
            x, y = self.context.to_device(next(dataloader_iter))
            self.calls.append((epoch_idx, batch_idx))
            loss = nn.functional.cross_entropy(self.engine(x), y)
            self.engine.backward(loss)
            self.engine.step()
            return {"loss": loss}

        def evaluate_batch(self, dataloader_iter, batch_idx):
            x, y = self.context.to_device(next(dataloader_iter))
            return {"validation_loss": nn.functional.cross_entropy(self.engine(x), y)}


    class PipeTrial(TinyTrial):
        """The MLP as a 2-stage DeepSpeed pipeline: the engine pulls the micro-batches."""

        def __init__(self, context):
            from deepspeed.pipe import PipelineModule

            self.context = context
            layers = [nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2)]
            model = PipelineModule(layers=layers, num_stages=2, loss_fn=nn.CrossEntropyLoss())
            config = dict(CONFIG, zero_optimization={"stage": 0})
            engine, _, _, _ = deepspeed.initialize(
                model=model, model_parameters=model.parameters(), config=config
            )
            self.engine = context.wrap_model_engine(engine)
            self.calls = []

        def build_validation_data_loader(self):
            return DataLoader(dataset(16), batch_size=4)

        def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
            self.calls.append((epoch_idx, batch_idx))
            return {"loss": self.engine.train_batch(dataloader_iter).mean()}

        def evaluate_batch(self, dataloader_iter, batch_idx):
            return {"validation_loss": self.engine.eval_batch(dataloader_iter).mean()}


    def params(trial):
        return {k: v.detach().clone() for k, v in trial.engine.module.state_dict().items()}


    def fit(storage, trial_id, length, latest=None, distributed=None, trial_class=TinyTrial):
        """Train to `length` batches; (trial, training losses by step, latest checkpoint)."""
        from headway import pytorch
        from headway.pytorch import deepspeed as hw_ds

        with hw_ds.init(
            checkpoint_storage=str(storage), local_trial_id=trial_id, distributed=distributed
        ) as context:
            trial = trial_class(context)
            trainer = hw_ds.Trainer(trial, context)
            trainer.fit(
                max_length=pytorch.Batch(length),
                reporting_period=pytorch.Batch(1),
                validation_period=pytorch.Batch(4),
                latest_checkpoint=latest,
                checkpoint_policy="none",
            )
            losses = {
                r["steps_completed"]: r["metrics"]["loss"]
                for r in context._core.train.reported_metrics("training")
            }
        return trial, losses, trainer.latest_checkpoint
    '''
)


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny_ds.py").write_text(TRIAL_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path / "model"))
    sys.modules.pop("tiny_ds", None)
    import tiny_ds

    yield tiny_ds
    sys.modules.pop("tiny_ds", None)


def test_fit_accumulates_micro_batches_and_resumes_exactly(tiny, tmp_path) -> None:
    world_size = os.environ.get("WORLD_SIZE")
    full, full_losses, _ = tiny.fit(tmp_path / "a", trial_id=1, length=12)
    assert os.environ.get("WORLD_SIZE") == world_size  # init() removed what it set
    # Two train_batch calls per batch (gradient_accumulation_steps), one optimizer step each.
    assert full.calls == [(b // 5, b) for b in range(12) for _ in range(2)]
    assert full.engine.global_steps == 12 and full.engine.micro_steps == 24
    assert sorted(full_losses) == list(range(1, 13))

    _, _, checkpoint = tiny.fit(tmp_path / "b", trial_id=2, length=7)
    folder = tmp_path / "b" / checkpoint
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {
        "state-dict.pth",
        "metadata.json",
        "load_data.json",
        "model0/mp_rank_00_model_states.pt",
        "model0/zero_pp_rank_0_mp_rank_00_optim_states.pt",
    } <= names
    assert json.loads((folder / "metadata.json").read_text())["format"] == "deepspeed"
    assert json.loads((folder / "load_data.json").read_text())["trial_type"] == "DeepSpeedTrial"

    # Batch 7 is mid-epoch (epoch 1) and the iterator is mid-way through data epoch 1.
    resumed, resumed_losses, _ = tiny.fit(tmp_path / "b", trial_id=2, length=12, latest=checkpoint)
    assert resumed.calls[0] == (1, 7) and len(resumed.calls) == 10
    assert resumed.engine.global_steps == 12
    final_full, final_resumed = tiny.params(full), tiny.params(resumed)
    assert all(torch.equal(final_full[k], final_resumed[k]) for k in final_full)
    assert {s: resumed_losses[s] for s in range(8, 13)} == {s: full_losses[s] for s in range(8, 13)}


def test_disable_auto_grad_accumulation_calls_train_batch_once_per_batch(tiny, tmp_path) -> None:
    class Manual(tiny.TinyTrial):
        def __init__(self, context):
            super().__init__(context)
            context.disable_auto_grad_accumulation()

        def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
            self.calls.append((epoch_idx, batch_idx))
            for _ in range(self.context.get_num_micro_batches_per_slot()):
                x, y = next(dataloader_iter)
                loss = torch.nn.functional.cross_entropy(self.engine(x), y)
                self.engine.backward(loss)
                self.engine.step()
            return loss

    with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
        trial = Manual(context)
        hw_ds.Trainer(trial, context).fit(max_length=pytorch.Batch(6), checkpoint_policy="none")
    assert trial.calls == [(b // 5, b) for b in range(6)]
    assert trial.engine.global_steps == 6

    # Manual accumulation that forgets it: the harness names the fix.
    class Forgetful(Manual):
        def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
            return tiny.TinyTrial.train_batch(self, dataloader_iter, epoch_idx, batch_idx)

    with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
        trainer = hw_ds.Trainer(Forgetful(context), context)
        with pytest.raises(RuntimeError, match="disable_auto_grad_accumulation"):
            trainer.fit(max_length=pytorch.Batch(2), checkpoint_policy="none")


def test_a_plain_torch_loader_needs_the_reproducibility_checks_disabled(tiny, tmp_path) -> None:
    class Plain(tiny.TinyTrial):
        def build_training_data_loader(self):
            return torch.utils.data.DataLoader(tiny.dataset(), batch_size=4)

    with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
        trainer = hw_ds.Trainer(Plain(context), context)
        with pytest.raises(TypeError, match=r"build_training_data_loader.*disable_dataset_repro"):
            trainer.fit(max_length=pytorch.Batch(1))
    with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
        trial = Plain(context)
        context.disable_dataset_reproducibility_checks()
        hw_ds.Trainer(trial, context).fit(max_length=pytorch.Batch(3), checkpoint_policy="none")
    assert len(trial.calls) == 6


RANK_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, os, pathlib, sys
    import tiny_ds

    storage = pathlib.Path(sys.argv[1])
    rank = int(os.environ["RANK"])

    def digest(trial):
        h = hashlib.sha256()
        for k, v in sorted(tiny_ds.params(trial).items()):
            h.update(k.encode()); h.update(v.numpy().tobytes())
        return h.hexdigest()

    # Each fit opens (and closes) its own process group through hw_ds.init().
    full, full_losses, _ = tiny_ds.fit(storage, 1, 8)
    _, _, ckpt = tiny_ds.fit(storage, 2, 5)
    resumed, resumed_losses, _ = tiny_ds.fit(storage, 2, 8, latest=ckpt)
    files = sorted(p.name for p in (storage / ckpt / "model0").iterdir())
    # The same with a 2-stage pipeline (one stage per rank, data-parallel size 1).
    pipe, pipe_losses, _ = tiny_ds.fit(storage, 3, 8, trial_class=tiny_ds.PipeTrial)
    _, _, ckpt = tiny_ds.fit(storage, 4, 5, trial_class=tiny_ds.PipeTrial)
    pipe_resumed, pipe_resumed_losses, _ = tiny_ds.fit(
        storage, 4, 8, latest=ckpt, trial_class=tiny_ds.PipeTrial
    )
    print("RESULT" + json.dumps({
        "rank": rank, "full": digest(full), "resumed": digest(resumed),
        "full_losses": full_losses, "resumed_losses": resumed_losses, "files": files,
        "steps": [full.engine.global_steps, resumed.engine.global_steps],
        "pipe": digest(pipe), "pipe_resumed": digest(pipe_resumed), "pipe_calls": pipe.calls,
        "pipe_mpu": pipe.context._mpu.data_parallel_world_size,
        "pipe_losses": pipe_losses, "pipe_resumed_losses": pipe_resumed_losses,
    }), flush=True)
    """
)


def test_two_ranks_zero1_and_a_pipeline_under_the_launcher_resume_exactly(tmp_path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "tiny_ds.py").write_text(TRIAL_SOURCE)
    (model / "ranks.py").write_text(RANK_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{model}{os.pathsep}{REPO}")
    for var in ("HEADWAY_CLUSTER_INFO", "HEADWAY_SLOT_IDS", "WORLD_SIZE", "RANK", "MASTER_PORT"):
        env.pop(var, None)
    command = [sys.executable, "-m", "headway.launch.deepspeed", "--nproc-per-node", "2", "--"]
    done = subprocess.run(
        [*command, "python", "ranks.py", str(tmp_path / "checkpoints")],
        cwd=model,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = sorted(
        (
            json.loads(line.split("RESULT", 1)[1])
            for line in done.stdout.splitlines()
            if "RESULT{" in line
        ),
        key=lambda r: r["rank"],
    )
    assert [r["rank"] for r in results] == [0, 1]
    # ZeRO-1 shards the optimizer state, the parameters stay replicated and in step.
    assert results[0]["full"] == results[1]["full"]
    assert all(r["resumed"] == r["full"] for r in results)
    assert all(r["steps"] == [8, 8] for r in results)
    assert {
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
    } <= set(results[0]["files"])
    chief = results[0]
    assert sorted(chief["full_losses"], key=int) == [str(s) for s in range(1, 9)]
    assert {s: chief["resumed_losses"][s] for s in ("6", "7", "8")} == {
        s: chief["full_losses"][s] for s in ("6", "7", "8")
    }
    # Pipeline: one train_batch call per batch (the engine takes both micro-batches), each rank
    # holds its own stage, and a resumed run ends with the same weights as an uninterrupted one.
    assert all(r["pipe_calls"] == [[b // 5, b] for b in range(8)] for r in results)
    assert all(r["pipe_mpu"] == 1 for r in results)
    assert results[0]["pipe"] != results[1]["pipe"]
    assert all(r["pipe_resumed"] == r["pipe"] for r in results)
    assert {s: chief["pipe_resumed_losses"][s] for s in ("6", "7", "8")} == {
        s: chief["pipe_losses"][s] for s in ("6", "7", "8")
    }
