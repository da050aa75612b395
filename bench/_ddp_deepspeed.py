"""DeepSpeedTrial overhead: samples/s of a 2-rank ``DeepSpeedTrial`` vs a raw DeepSpeed loop.

A row for ``bench/ddp_overhead.py`` (``measure()``), also runnable alone:
``.venv/bin/python bench/_ddp_deepspeed.py`` prints one JSON line.

Both sides train ``ddp_overhead``'s model (MLP 64-1024-1024-1024-10, SGD with momentum, its
digits data, a global batch of 64 = 32 per rank) as one DeepSpeed engine with ZeRO stage 1, on
2 ranks (gloo on the CPU; DeepSpeed's accelerator on GPUs):

- raw: ``torch.distributed.run --standalone --nproc-per-node 2`` running a plain loop:
  ``DistributedSampler`` + ``DataLoader`` + ``engine(x)`` / ``engine.backward`` / ``engine.step``;
- harness: ``python -m headway.launch.deepspeed --nproc-per-node 2 --`` running the same engine
  as a ``DeepSpeedTrial`` under ``Trainer.fit(max_length=Batch(n))`` in local mode (resumable
  sharded loader, iterator hand-off, metrics all-gathered and reported every 100 batches,
  preemption checked at each report).

Timed inside rank 0 as ``ddp_overhead`` does: from the start of training (raw: building the
loader; harness: the first ``on_training_epoch_start``) to its end (harness: the final
validation starts), after the same warm-up; a warm-up ``fit()`` / loop runs first in the same
processes. Raw and harness launches alternate ``repeats`` times (order swapped each time); the
ratio is the median of the per-pair ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROW = "DeepSpeedTrial vs raw DeepSpeed loop (same model, ZeRO-1, 2 ranks gloo)"
RANKS = 2
BENCH = Path(__file__).resolve().parent


def _shared() -> Any:
    """``bench/ddp_overhead.py`` (its model, data and batch size), imported lazily so that it can
    import this module too."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import ddp_overhead

    return ddp_overhead


def _engine(model: Any) -> Any:
    import deepspeed

    shared = _shared()
    config = {
        "train_batch_size": shared.GLOBAL_BATCH,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": 1},
        "zero_allow_untested_optimizer": True,  # ddp_overhead's torch SGD, shared by both sides
        "steps_per_print": 10**9,
    }
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=shared._optimizer(model), config=config
    )
    return engine


# -- the rank processes ---------------------------------------------------------------------------


def worker_raw(batches: int, warmup: int) -> None:
    """A plain DeepSpeed loop: ``warmup`` untimed batches, then ``batches`` timed ones."""
    import torch
    import torch.distributed as dist

    import headway.pytorch.deepspeed  # noqa: F401 - the same CPU set-up as the harness side

    shared = _shared()
    import deepspeed

    deepspeed.init_distributed(auto_mpi_discovery=False)
    dataset = shared._dataset()
    engine = _engine(shared._model())
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(count: int) -> None:
        sampler: Any = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=shared.GLOBAL_BATCH // dist.get_world_size(), sampler=sampler
        )
        done, epoch = 0, 0
        while done < count:
            sampler.set_epoch(epoch)
            for x, y in loader:
                x, y = x.to(engine.device), y.to(engine.device)
                loss = loss_fn(engine(x), y)
                engine.backward(loss)
                engine.step()
                done += 1
                if done == count:
                    break
            epoch += 1

    train(warmup)
    dist.barrier()
    start = time.perf_counter()
    train(batches)
    _shared().report_result("raw", batches, time.perf_counter() - start)


def worker_harness(batches: int, warmup: int) -> None:
    """The same engine as a ``DeepSpeedTrial``: a warm-up ``fit()``, then a timed one."""
    import torch

    from headway import pytorch
    from headway.pytorch import deepspeed as hw_ds

    shared = _shared()

    from _clock import TrainingClock  # bench/ is sys.path[0]

    class BenchTrial(hw_ds.DeepSpeedTrial):
        def __init__(self, context: hw_ds.DeepSpeedTrialContext) -> None:
            self.context = context
            self.dataset = shared._dataset()
            self.engine = context.wrap_model_engine(_engine(shared._model()))
            self.loss_fn = torch.nn.CrossEntropyLoss()
            self.clock = TrainingClock()

        def build_training_data_loader(self) -> pytorch.DataLoader:
            return pytorch.DataLoader(
                self.dataset,
                batch_size=self.context.get_train_micro_batch_size_per_gpu(),
                shuffle=True,
            )

        def build_validation_data_loader(self) -> pytorch.DataLoader:
            subset = torch.utils.data.Subset(self.dataset, range(shared.GLOBAL_BATCH))
            return pytorch.DataLoader(subset, batch_size=shared.GLOBAL_BATCH)

        def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
            return {"clock": self.clock}

        def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> Any:
            x, y = self.context.to_device(next(dataloader_iter))
            loss = self.loss_fn(self.engine(x), y)
            self.engine.backward(loss)
            self.engine.step()
            return {"loss": loss}

        def evaluate_batch(self, dataloader_iter: Any, batch_idx: int) -> dict[str, Any]:
            x, y = self.context.to_device(next(dataloader_iter))
            return {"validation_loss": self.loss_fn(self.engine(x), y)}

    # Every rank writes its shards into the same checkpoint: a folder in the shared working
    # directory (the driver's temporary directory).
    storage = str(Path.cwd() / "checkpoints")

    def fit(count: int) -> tuple[float, float]:
        with hw_ds.init(checkpoint_storage=storage) as context:
            trial = BenchTrial(context)
            trainer = hw_ds.Trainer(trial, context)
            context.distributed.barrier()
            start = time.perf_counter()
            trainer.fit(max_length=pytorch.Batch(count), checkpoint_policy="none")
            clock = trial.clock
            return clock.training_done - clock.training_started, clock.training_started - start

    fit(warmup)
    seconds, setup = fit(batches)
    _shared().report_result("harness", batches, seconds, setup_ms=1e3 * setup)


# -- the driver -----------------------------------------------------------------------------------


def _launch(kind: str, batches: int, warmup: int) -> dict[str, float]:
    worker_args = ["--batches", str(batches), "--warmup", str(warmup)]
    return _shared().launch_ranks(
        kind, Path(__file__).resolve(), worker_args, "headway.launch.deepspeed"
    )


def measure(batches: int = 300, warmup: int = 10, repeats: int = 3) -> dict[str, Any]:
    """Run the comparison; return its figures (``row``, samples/s, ``ratio`` = harness / raw)."""
    from _pairs import alternate_pairs, ratio_figures  # bench/ is sys.path[0]

    raw, harness = alternate_pairs(
        lambda: _launch("raw", batches, warmup),
        lambda: _launch("harness", batches, warmup),
        repeats,
    )
    gbs = _shared().GLOBAL_BATCH
    return {
        "row": ROW,
        "ranks": RANKS,
        "global_batch_size": gbs,
        "zero_stage": 1,
        "timed_batches": batches,
        "repeats": repeats,
        **ratio_figures(raw, harness, "harness", gbs),
        "harness_fit_setup_ms": round(statistics.median(r["setup_ms"] for r in harness), 1),
    }


def main() -> None:
    """Command line: run ``measure`` and print its figures as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300, help="timed global batches per run")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", choices=("raw", "harness"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "raw":
        worker_raw(args.batches, args.warmup)
    elif args.worker == "harness":
        worker_harness(args.batches, args.warmup)
    else:
        print(json.dumps(measure(args.batches, args.warmup, args.repeats)))


if __name__ == "__main__":
    main()
