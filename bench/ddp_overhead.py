"""DDP overhead: samples/s of a 2-rank ``PyTorchTrial`` under the launcher vs a raw DDP loop.

Run from the repository root: ``.venv/bin/python bench/ddp_overhead.py`` (``--backend nccl`` on
a host with two GPUs; the default is gloo on the CPU, or nccl when two GPUs are visible).

Both sides train the same compute-bound MLP (64-1024-1024-1024-10, SGD with momentum) on
scikit-learn's digits (1,437 training rows as 64 features) with a global batch of 64, i.e. 32
per rank, on 2 ranks:

- raw: ``python -m torch.distributed.run --standalone --nproc-per-node 2`` running a plain loop:
  ``DistributedSampler`` + ``DataLoader`` + ``DistributedDataParallel`` + forward / backward /
  step;
- harness: ``python -m headway.launch.torch_distributed --nproc-per-node 2 --`` running the
  same model as a ``PyTorchTrial`` under ``Trainer.fit(max_length=Batch(n))`` in local mode
  (per-rank data sharding, DDP wrap, training metrics all-gathered and reported every 100
  batches, preemption checked at each report).

Two more rows compare the seed APIs built on the same launcher with their own raw loops, in the
same run (gloo only; ``--rows`` picks rows):

- ``torch_trainer``: ``TorchTrainer(num_workers=2)`` (``headway.torch_trainer``) against the raw
  DDP loop above, timed in the driver around ``train()`` calls (``bench/_ddp_torch_trainer.py``);
- ``deepspeed``: a ``DeepSpeedTrial`` under ``python -m headway.launch.deepspeed`` against a raw
  DeepSpeed engine loop under torchrun, both ZeRO stage 1 (``bench/_ddp_deepspeed.py``).

Each rank process is timed inside itself, from the start of training (raw: building the data
loader; harness: the first ``on_training_epoch_start``) to its end (harness: the final
validation starts), after the same number of warm-up batches; process start-up is not counted,
and the harness's ``fit()`` set-up before the first batch is reported apart
(``harness_fit_setup_ms``). Raw and harness launches alternate
(order swapped each time) ``--repeats`` times; the ratio is the median of the per-pair ratios
and samples/s are medians. Target: >= 0.95x raw. Each rank runs ``OMP_NUM_THREADS=1`` threads
(2 ranks on this 2-core machine). The last line printed is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _tiny import pick, tiny
from torch import nn

REPO = Path(__file__).resolve().parent.parent
GLOBAL_BATCH = 64
RANKS = 2
WIDTH = 1024
MARK = "ddp_overhead_result"
ROWS = ("harness", "torch_trainer", "deepspeed")


def _dataset() -> torch.utils.data.TensorDataset:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    return torch.utils.data.TensorDataset(x[:1437], y[:1437])


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(64, WIDTH),
        nn.ReLU(),
        nn.Linear(WIDTH, WIDTH),
        nn.ReLU(),
        nn.Linear(WIDTH, WIDTH),
        nn.ReLU(),
        nn.Linear(WIDTH, 10),
    )


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def _device(backend: str) -> torch.device:
    if backend == "nccl":
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def report_result(kind: str, batches: int, seconds: float, **extra: float) -> None:
    """On rank 0, print the ``MARK`` line ``launch_ranks`` reads: samples/s and ``extra``."""
    if int(os.environ.get("RANK", "0")) == 0:
        result = {"kind": kind, "samples_per_s": batches * GLOBAL_BATCH / seconds, **extra}
        print(json.dumps({MARK: result}), flush=True)


# -- the rank processes ---------------------------------------------------------------------------


def worker_raw(batches: int, warmup: int, backend: str) -> None:
    """A plain DDP loop: ``warmup`` untimed batches, then ``batches`` timed ones."""
    import torch.distributed as dist

    dist.init_process_group(backend)
    device = _device(backend)
    dataset = _dataset()
    model = nn.parallel.DistributedDataParallel(
        _model().to(device), device_ids=[device.index] if device.type == "cuda" else None
    )
    opt = _optimizer(model)
    loss_fn = nn.CrossEntropyLoss()

    def train(count: int) -> None:
        sampler: torch.utils.data.distributed.DistributedSampler = (
            torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True)
        )
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=GLOBAL_BATCH // dist.get_world_size(), sampler=sampler
        )
        done, epoch = 0, 0
        while done < count:
            sampler.set_epoch(epoch)
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                done += 1
                if done == count:
                    break
            epoch += 1
        if device.type == "cuda":
            torch.cuda.synchronize()

    train(warmup)
    dist.barrier()
    start = time.perf_counter()
    train(batches)
    report_result("raw", batches, time.perf_counter() - start)
    dist.destroy_process_group()


def worker_harness(batches: int, warmup: int, backend: str) -> None:
    """The same training as a ``PyTorchTrial``: a warm-up ``fit()``, then a timed one."""
    import torch.distributed as dist
    from _clock import TrainingClock  # bench/ is sys.path[0]

    from headway import core, pytorch

    class BenchTrial(pytorch.PyTorchTrial):
        def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
            self.context = context
            self.dataset = _dataset()
            self.model = context.wrap_model(_model())
            self.opt = context.wrap_optimizer(_optimizer(self.model))
            self.loss_fn = nn.CrossEntropyLoss()
            self.clock = TrainingClock(device)

        def build_training_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(
                self.dataset, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
            )

        def build_validation_data_loader(self) -> pytorch.DataLoader:
            subset = torch.utils.data.Subset(self.dataset, range(GLOBAL_BATCH))
            return pytorch.DataLoader(subset, batch_size=GLOBAL_BATCH)

        def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
            return {"clock": self.clock}

        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
            x, y = batch
            loss = self.loss_fn(self.model(x), y)
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            return {"loss": loss}

        def evaluate_batch(self, batch: Any) -> dict[str, Any]:  # type: ignore[override]
            x, y = batch
            return {"validation_loss": self.loss_fn(self.model(x), y)}

    dist.init_process_group(backend)
    device = _device(backend)
    distributed = core.DistributedContext.from_torch_distributed()
    hparams = {"global_batch_size": GLOBAL_BATCH}
    # Rank 0 creates the directory and shares its name; local mode checkpoints go there.
    storage = distributed.broadcast(tempfile.mkdtemp() if distributed.rank == 0 else None)

    def fit(count: int) -> tuple[float, float]:
        """(seconds of training, seconds of fit() before the first batch)."""
        with pytorch.init(
            hparams=hparams, distributed=distributed, checkpoint_storage=storage
        ) as context:
            trial = BenchTrial(context)
            trainer = pytorch.Trainer(trial, context)
            distributed.barrier()
            start = time.perf_counter()
            trainer.fit(max_length=pytorch.Batch(count), checkpoint_policy="none")
            clock = trial.clock
            return clock.training_done - clock.training_started, clock.training_started - start

    fit(warmup)
    seconds, setup = fit(batches)
    report_result("harness", batches, seconds, setup_ms=1e3 * setup)
    distributed.barrier()
    if distributed.rank == 0:
        shutil.rmtree(storage, ignore_errors=True)
    dist.destroy_process_group()


# -- the driver -----------------------------------------------------------------------------------


def _launch(kind: str, args: argparse.Namespace) -> dict[str, float]:
    worker_args = ["--batches", str(args.batches), "--warmup", str(args.warmup)]
    worker_args += ["--backend", args.backend]
    return launch_ranks(
        kind, Path(__file__).resolve(), worker_args, "headway.launch.torch_distributed"
    )


def launch_ranks(
    kind: str, script: Path, worker_args: list[str], launcher: str
) -> dict[str, float]:
    """Run ``script --worker KIND WORKER_ARGS`` on ``RANKS`` ranks (``"raw"``: under torchrun;
    else under ``python -m LAUNCHER``) and return what rank 0 printed with ``report_result``.

    Raises:
        RuntimeError: no result line (with the run's output).
    """
    me = [str(script), "--worker", kind, *worker_args]
    if kind == "raw":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        cmd += ["--nproc-per-node", str(RANKS), *me]
    else:
        cmd = [sys.executable, "-m", launcher]
        cmd += ["--nproc-per-node", str(RANKS), "--", "python", *me]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop("HEADWAY_CLUSTER_INFO", None)
    env.pop("HEADWAY_SLOT_IDS", None)
    # A folder of its own as the working directory: it is the "model definition" the harness
    # snapshots into checkpoints (the repository would cost a walk over thousands of files).
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        start = line.find("{")
        if MARK in line and start >= 0:
            return dict(json.loads(line[start:])[MARK])
    raise RuntimeError(f"{kind} run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--batches", type=int, default=pick(300, 5), help="timed global batches per run"
    )
    parser.add_argument("--warmup", type=int, default=pick(10, 2))
    parser.add_argument("--repeats", type=int, default=pick(5, 1))
    two_gpus = torch.cuda.is_available() and torch.cuda.device_count() >= RANKS
    parser.add_argument(
        "--backend", choices=("gloo", "nccl"), default="nccl" if two_gpus else "gloo"
    )
    parser.add_argument(
        "--rows",
        # Tiny mode leaves DeepSpeed out: importing it alone takes a minute on a busy machine
        # (its own tests, tests/headway/pytorch/test_deepspeed_*.py, run the same engine).
        default=",".join(row for row in ROWS if not (tiny() and row == "deepspeed")),
        help=f"comma-separated rows to measure, of {', '.join(ROWS)} (default: all)",
    )
    parser.add_argument("--worker", choices=("raw", "harness"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "raw":
        worker_raw(args.batches, args.warmup, args.backend)
        return
    if args.worker == "harness":
        worker_harness(args.batches, args.warmup, args.backend)
        return
    if args.backend == "nccl" and not two_gpus:
        parser.error(f"--backend nccl needs {RANKS} CUDA devices")
    rows = [row for row in args.rows.split(",") if row]
    unknown = sorted(set(rows) - set(ROWS))
    if unknown or not rows:
        parser.error(f"--rows: unknown row(s) {unknown}; choose from {', '.join(ROWS)}")
    if args.backend != "gloo" and set(rows) - {"harness"}:
        parser.error("--rows torch_trainer / deepspeed are measured on gloo only")
    figures: dict[str, Any] = {"backend": args.backend, "ranks": RANKS}
    if "harness" in rows:
        figures.update(_harness_row(args))
    if "torch_trainer" in rows:
        from _ddp_torch_trainer import measure as torch_trainer_row  # bench/ is sys.path[0]

        figures["torch_trainer"] = torch_trainer_row(
            batches=args.batches, warmup=args.warmup, repeats=args.repeats
        )
    if "deepspeed" in rows:
        from _ddp_deepspeed import measure as deepspeed_row

        figures["deepspeed"] = deepspeed_row(args.batches, args.warmup, args.repeats)
    for key in ("torch_trainer", "deepspeed"):
        if key in figures:
            _print_row(figures[key])
    print(json.dumps(figures))


def _print_row(row: dict[str, Any]) -> None:
    other = next(
        v for k, v in row.items() if k.endswith("_samples_per_s") and k != "raw_samples_per_s"
    )
    low, high = row["ratio_range"]
    print(
        f"{row['row']}: raw {row['raw_samples_per_s']:,.0f} samples/s, "
        f"{other:,.0f} samples/s, ratio {row['ratio']:.3f} (pairs {low:.2f}-{high:.2f})"
    )


def _harness_row(args: argparse.Namespace) -> dict[str, Any]:
    """The PyTorchTrial row: alternating raw / harness launches, their medians and ratio."""
    from _pairs import alternate_pairs, ratio_figures  # bench/ is sys.path[0]

    raw, harness = alternate_pairs(
        lambda: _launch("raw", args), lambda: _launch("harness", args), args.repeats
    )
    figures = {
        "global_batch_size": GLOBAL_BATCH,
        "mlp_width": WIDTH,
        "timed_batches": args.batches,
        **ratio_figures(raw, harness, "harness", GLOBAL_BATCH),
        "harness_fit_setup_ms": round(statistics.median(r["setup_ms"] for r in harness), 1),
    }
    print(
        f"{'backend':<8}{'raw samples/s':>16}{'harness samples/s':>20}{'ratio':>8}{'target':>8}"
        f"{'pair range':>14}"
    )
    print(
        f"{args.backend:<8}{figures['raw_samples_per_s']:>16,.0f}"
        f"{figures['harness_samples_per_s']:>20,.0f}{figures['ratio']:>8.3f}{0.95:>8.2f}"
        f"{'-'.join(f'{r:.2f}' for r in figures['ratio_range']):>14}"
    )
    return figures


if __name__ == "__main__":
    main()
