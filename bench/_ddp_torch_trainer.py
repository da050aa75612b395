"""TorchTrainer vs a raw DDP loop: samples/s of the same MLP on 2 gloo workers.

``measure()`` is the row "TorchTrainer vs raw DDP loop (same model, 2 workers gloo)" of
``bench/ddp_overhead.py``: the same MLP, data, optimizer and global batch of 64 (32 per worker)
as its raw and harness sides (imported from it), trained

- raw: ``ddp_overhead``'s plain DDP loop under torchrun, timed inside rank 0 (as there);
- TorchTrainer: ``TorchTrainer(num_workers=2)`` with the default ``TrainingOperator`` loop
  (``DistributedSampler`` added by ``register_data``, DDP by ``register``), one ``train()`` per
  epoch of 22 batches (the last one shorter) until the same number of batches is done, timed
  in the driver around those calls: command round trips and the state snapshot rank 0 writes
  after each ``train()`` (the fault-tolerance cost) are counted; starting the workers and a
  warm-up call are not.

Each side runs ``--repeats`` times, alternating which goes first; the ratio is the median of
the per-pair ratios, samples/s are medians. Every worker uses one thread (2 workers on this
2-core machine). Standalone: ``.venv/bin/python bench/_ddp_torch_trainer.py`` prints one JSON
line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from headway.torch_trainer import BATCH_SIZE, TorchTrainer, TrainingOperator

WORKERS = 2


def _ddp_overhead() -> ModuleType:
    # Imported when used, not at import time: ddp_overhead imports this module.
    bench = str(Path(__file__).resolve().parent)
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module("ddp_overhead")


def _one_thread() -> None:
    torch.set_num_threads(1)


class BenchOperator(TrainingOperator):
    """ddp_overhead's MLP, data and optimizer, trained by the default loops."""

    def setup(self, config: dict[str, Any]) -> None:
        bench = _ddp_overhead()
        dataset = bench._dataset()
        model = bench._model()
        self.model, self.optimizer, self.criterion = self.register(
            models=model,
            optimizers=bench._optimizer(model),
            criterion=torch.nn.CrossEntropyLoss(),
        )
        loader = torch.utils.data.DataLoader(dataset, batch_size=config[BATCH_SIZE], shuffle=True)
        self.register_data(train_loader=loader)


def _train(trainer: TorchTrainer, batches: int, per_epoch: int) -> float:
    """Seconds to train ``batches`` batches per worker, one ``train()`` per epoch."""
    start = time.perf_counter()
    done = 0
    while done < batches:
        steps = min(per_epoch, batches - done)
        trainer.train(num_steps=steps)
        done += steps
    return time.perf_counter() - start


def torch_trainer_samples_per_s(batches: int, warmup: int) -> float:
    """Start a 2-worker TorchTrainer, warm it up, and time ``batches`` global batches."""
    bench = _ddp_overhead()
    per_epoch = len(bench._dataset()) // bench.GLOBAL_BATCH
    trainer = TorchTrainer(
        training_operator_cls=BenchOperator,
        num_workers=WORKERS,
        use_gpu=False,
        config={BATCH_SIZE: bench.GLOBAL_BATCH},
        initialization_hook=_one_thread,
    )
    try:
        trainer.train(num_steps=warmup)
        seconds = _train(trainer, batches, per_epoch)
    finally:
        trainer.shutdown()
    return float(batches * bench.GLOBAL_BATCH / seconds)


def measure(
    batches: int = 300,
    warmup: int = 10,
    repeats: int = 5,
    raw: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """The row's figures: medians of ``repeats`` alternating raw / TorchTrainer runs.

    Arguments:
        batches: timed global batches per run (as ddp_overhead's ``--batches``).
        warmup: untimed batches first.
        repeats: pairs of runs.
        raw: returns the raw loop's samples/s for one run; default: ddp_overhead's torchrun
            launch of its raw worker with these ``batches`` / ``warmup`` on gloo.
    """
    bench = _ddp_overhead()
    if raw is None:
        args = argparse.Namespace(batches=batches, warmup=warmup, backend="gloo")

        def raw() -> float:
            return float(bench._launch("raw", args)["samples_per_s"])

    from _pairs import alternate_pairs, ratio_figures  # bench/ is sys.path[0]

    raws, trainers = alternate_pairs(
        lambda: {"samples_per_s": raw()},
        lambda: {"samples_per_s": torch_trainer_samples_per_s(batches, warmup)},
        repeats,
    )
    return {
        "row": "TorchTrainer vs raw DDP loop (same model, 2 workers gloo)",
        "workers": WORKERS,
        "global_batch_size": bench.GLOBAL_BATCH,
        "timed_batches": batches,
        **ratio_figures(raws, trainers, "torch_trainer", bench.GLOBAL_BATCH),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.batches, args.warmup, args.repeats)))


if __name__ == "__main__":
    main()
