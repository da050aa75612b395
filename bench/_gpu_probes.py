"""The in-process checks of bench/gpu_check.py: ``python bench/_gpu_probes.py NAME --device cuda``.

Each probe trains something small in local mode (no registry) on ``--device``, asserts that it
ran there, and prints one JSON line of what it found; a failed assertion exits non-zero.
``--device cpu`` runs the same code on a machine without a GPU (the CPU-side expectations:
bfloat16 autocast, no NVML metrics), which is how the probes are exercised off a GPU host
(tests/bench/test_gpu_check.py); the dcgan probe needs torchvision, which the CPU machines here
lack (docs/pytorch-trial.md, "Porting from Determined").

Probes: ``use_amp``, ``nvml``, ``deepspeed``, ``lightning``, ``transformers``, ``dcgan``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The tests' tiny Lightning and Hugging Face set-ups are reused; imported by name so that mypy
# (which leaves tests/ unchecked) does not follow them.
sys.path.insert(0, str(REPO))

BATCHES = 20


def probe_use_amp(device: str, workdir: Path) -> dict[str, Any]:
    """A PyTorchTrial under ``context.experimental.use_amp()``: the forward pass runs in float16
    on CUDA (bfloat16 on CPU), outputs come back float32, and on CUDA the checkpointed
    ``GradScaler`` holds a scale."""
    import torch
    from torch import nn

    from headway import pytorch

    inner: set[torch.dtype] = set()
    outer: set[torch.dtype] = set()
    devices: set[str] = set()

    class AmpTrial(pytorch.PyTorchTrial):
        def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
            self.context = context
            context.experimental.use_amp()
            net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2))
            net[0].register_forward_hook(lambda _m, _i, out: inner.add(out.dtype))
            self.model = context.wrap_model(net)
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

        def _data(self) -> torch.utils.data.TensorDataset:
            x = torch.randn(256, 16, generator=torch.Generator().manual_seed(0))
            return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())

        def build_training_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(self._data(), batch_size=16)

        def build_validation_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(self._data(), batch_size=64)

        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
            x, y = batch
            devices.add(x.device.type)
            out = self.model(x)
            outer.add(out.dtype)
            loss = nn.functional.cross_entropy(out, y)
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            return {"loss": loss}

        def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
            x, y = batch
            return {"validation_accuracy": (self.model(x).argmax(1) == y).float().mean()}

    storage = workdir / "checkpoints"
    hparams = {"global_batch_size": 16}
    with pytorch.init(hparams=hparams, checkpoint_storage=str(storage)) as ctx:
        trainer = pytorch.Trainer(AmpTrial(ctx), ctx)
        trainer.fit(max_length=pytorch.Batch(BATCHES))
    state = torch.load(
        storage / str(trainer.latest_checkpoint) / pytorch.STATE_FILE, weights_only=False
    )
    (scaler,) = state["scalers_state_dict"]
    want = torch.float16 if device == "cuda" else torch.bfloat16
    assert devices == {device}, devices
    assert inner == {want}, inner
    assert outer == {torch.float32}, outer
    assert ("scale" in scaler) == (device == "cuda"), scaler  # a disabled scaler saves {}
    return {"device": device, "autocast_dtype": str(want), "scaler": scaler}


def probe_nvml(device: str, workdir: Path) -> dict[str, Any]:
    """The system-metrics sampler with a tensor held on the GPU: ``gpu0_util_percent`` and a
    non-zero ``gpu0_memory_used_mib`` from NVML on CUDA; no ``gpu*`` metrics on CPU."""
    import torch

    from headway.core._system_metrics import SystemMetricsSampler

    held = torch.ones(1024, 1024, 64, device=device)  # 256 MiB, so memory in use shows
    sampler = SystemMetricsSampler(lambda *_: None, 10.0)
    sampler.sample()  # primes the CPU percentages
    _, metrics = sampler.sample()
    gpu = {name: value for name, value in metrics.items() if name.startswith("gpu")}
    if device == "cuda":
        assert 0.0 <= gpu["gpu0_util_percent"] <= 100.0, gpu
        assert gpu["gpu0_memory_used_mib"] >= 256, gpu
    else:
        assert gpu == {}, gpu
    del held
    return {"device": device, "gpu_metrics": gpu}


def probe_deepspeed(device: str, workdir: Path) -> dict[str, Any]:
    """examples/digits_deepspeed (ZeRO-1, torch Adam) for ``BATCHES`` batches in one local
    process: its engine's parameters live on ``device`` and DeepSpeed chose that accelerator."""
    if device == "cpu":
        os.environ["DS_ACCELERATOR"] = "cpu"
    example = shutil.copytree(REPO / "examples" / "digits_deepspeed", workdir / "example")
    sys.path.insert(0, str(example))
    os.chdir(example)
    from deepspeed.accelerator import get_accelerator
    from model_def import DigitsDeepSpeedTrial  # type: ignore[import-not-found]

    from headway import pytorch
    from headway.pytorch import deepspeed as hw_ds

    hparams = {"global_batch_size": 32, "lr": 0.005, "channels": 32, "dropout": 0.1}
    with hw_ds.init(hparams=hparams, checkpoint_storage=str(workdir / "checkpoints")) as ctx:
        trial = DigitsDeepSpeedTrial(ctx)
        hw_ds.Trainer(trial, ctx).fit(max_length=pytorch.Batch(BATCHES))
    placed = {p.device.type for p in trial.engine.parameters()}
    accelerator = get_accelerator().device_name()
    assert placed == {device}, placed
    assert accelerator == device, accelerator
    return {"device": device, "accelerator": accelerator, "batches": BATCHES}


def probe_lightning(device: str, workdir: Path) -> dict[str, Any]:
    """A Lightning ``Trainer`` on ``device`` (``accelerator="gpu"`` for CUDA) with
    ``HeadwayLogger`` and ``HeadwayCallback`` on a local Core API context: every training step
    ran there and its metrics reached the context."""
    import lightning.pytorch as pl

    from headway import core
    from headway.lightning import HeadwayCallback, HeadwayLogger

    tiny = importlib.import_module("tests.headway.lightning._tiny")
    seen: set[str] = set()

    class Where(pl.Callback):
        """Records the device of each training batch (after Lightning moved it)."""

        def on_train_batch_start(
            self, trainer: pl.Trainer, module: pl.LightningModule, batch: Any, batch_idx: int
        ) -> None:
            seen.add(batch[0].device.type)

    kwargs = tiny.trainer_kwargs(workdir / "lightning")
    kwargs["accelerator"] = "gpu" if device == "cuda" else "cpu"
    train, validation = tiny.loaders(batches=BATCHES)
    with core.init(checkpoint_storage=str(workdir / "checkpoints")) as ctx:
        trainer = pl.Trainer(
            max_epochs=1,
            logger=HeadwayLogger(ctx),
            callbacks=[HeadwayCallback(ctx), Where()],
            **kwargs,
        )
        trainer.fit(tiny.TinyRegression(), train, validation)
        steps = [r["steps_completed"] for r in ctx.train.reported_metrics("training")]
    assert seen == {device}, seen
    assert steps and steps[-1] == BATCHES, steps
    return {"device": device, "reported_steps": len(steps)}


def probe_transformers(device: str, workdir: Path) -> dict[str, Any]:
    """A Hugging Face ``Trainer`` (tiny BERT built from its config, generated tokens) with
    ``DetCallback`` on a local Core API context: the model trained on ``device`` and the
    callback reported its losses."""
    from headway import core
    from headway.transformers import DetCallback

    tiny_trainer = importlib.import_module("tests.headway.transformers.tiny_trainer")
    os.chdir(workdir)
    args = tiny_trainer.training_args(workdir / "out", use_cpu=device == "cpu")
    with core.init(checkpoint_storage=str(workdir / "checkpoints")) as ctx:
        hf = tiny_trainer.trainer(args, [DetCallback(ctx, args)])
        hf.train()
        losses = [r["metrics"]["loss"] for r in ctx.train.reported_metrics("training")
                  if "loss" in r["metrics"]]  # fmt: skip
    assert hf.model.device.type == device, hf.model.device
    assert losses and all(math.isfinite(x) for x in losses), losses
    return {"device": device, "losses": losses}


def probe_dcgan(device: str, workdir: Path) -> dict[str, Any]:
    """Determined's DeepSpeed DCGAN port (two engines) for 20 batches in one local process, on
    scikit-learn's digits upscaled to MNIST's size, with the config edits Headway needs
    (docs/pytorch-trial.md, "Porting from Determined": no container fields, ZeRO stage 1, torch
    Adam instead of a compiled one). On CUDA its engines must have allocated GPU memory."""
    import torch
    import yaml

    port = shutil.copytree(
        REPO / "tests" / "fixtures" / "determined_ports" / "dcgan", workdir / "d"
    )
    config = yaml.safe_load((port / "mnist.yaml").read_text())
    (port / "dataroot").mkdir()
    config["data"]["dataroot"] = str(port / "dataroot")
    (port / "mnist.yaml").write_text(yaml.safe_dump(config))
    ds_config = json.loads((port / "ds_config.json").read_text())
    ds_config["zero_optimization"] = {"stage": 1}
    ds_config["optimizer"]["params"]["torch_adam"] = True
    (port / "ds_config.json").write_text(json.dumps(ds_config))
    if device == "cpu":
        os.environ["DS_ACCELERATOR"] = "cpu"
    sys.path.insert(0, str(port))
    os.chdir(port)
    import trainer  # type: ignore[import-not-found]

    trainer.main(config_file="mnist.yaml", local=True)
    allocated = torch.cuda.max_memory_allocated() if device == "cuda" else 0
    if device == "cuda":
        assert allocated > 0, "the DCGAN engines allocated no GPU memory"
    return {"device": device, "batches": 20, "max_memory_allocated_mib": allocated / 2**20}


PROBES: dict[str, Callable[[str, Path], dict[str, Any]]] = {
    "use_amp": probe_use_amp,
    "nvml": probe_nvml,
    "deepspeed": probe_deepspeed,
    "lightning": probe_lightning,
    "transformers": probe_transformers,
    "dcgan": probe_dcgan,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", choices=sorted(PROBES))
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--workdir", type=Path, required=True, help="an empty folder to write in")
    args = parser.parse_args()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            sys.exit("--device cuda: torch sees no CUDA device")
    found = PROBES[args.probe](args.device, args.workdir.resolve())
    print(json.dumps({"probe": args.probe, **found}))


if __name__ == "__main__":
    main()
