"""Harness overhead: samples/s of one training loop under ``headway.pytorch`` vs raw PyTorch.

Run from the repository root: ``.venv/bin/python bench/harness_overhead.py`` (``make bench``).

Two models on scikit-learn's digits (1,437 training images as 64 features, batch 32, SGD with
momentum, shuffled every epoch):

- tiny: MLP 64-128-10, where per-batch harness work is most visible;
- large: MLP 64-2048-2048-2048-10, compute-bound (what the harness should not slow down).

Raw: ``for x, y in torch.utils.data.DataLoader(..., shuffle=True)`` + forward / backward / step.
Harness: the same model as a ``PyTorchTrial`` run by ``Trainer.fit(max_length=Batch(n))`` in
local mode (training metrics returned as tensors each batch, averaged and reported every 100
batches, preemption checked every batch). The harness is timed from ``fit()`` until the final
validation starts, so data-loader setup and metric reports are included; the end-of-training
validation and checkpoint are timed separately ("end cost"). After a warm-up, raw and harness
runs alternate (order swapped each time) ``--repeats`` times; the ratio is the median of the
per-pair ratios (each pair ran back to back under the same machine load) and samples/s are
medians. The tiny model runs on one torch thread (``--tiny-threads``: its quantity is per-batch
overhead, which two threads on a busy 2-core machine drown in noise), the large one on the
default. Targets: >= 0.95x raw on the large model, >= 0.85x on the tiny one. ``--profile``
prints a cProfile of one tiny harness run. A last row runs the tiny harness with the
system-metrics sampler (``headway.core._system_metrics``) off and on, alternated, sampling every
``--system-interval`` s (0.1: 100 times its default rate, so that its cost would show).
The last line printed is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import pstats
import statistics
import tempfile
import time
from typing import Any

import torch
from _tiny import pick
from sklearn.datasets import load_digits
from torch import nn

from headway import pytorch
from headway.core._system_metrics import SystemMetricsSampler

BATCH = 32


def _dataset() -> torch.utils.data.TensorDataset:
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    return torch.utils.data.TensorDataset(x[:1437], y[:1437])


def _model(kind: str) -> nn.Module:
    if kind == "tiny":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    width = 2048
    return nn.Sequential(
        nn.Linear(64, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, 10),
    )


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def run_raw(kind: str, batches: int, dataset: torch.utils.data.TensorDataset) -> float:
    """Samples/s of a plain PyTorch loop over ``batches`` batches."""
    torch.manual_seed(0)
    model = _model(kind)
    opt = _optimizer(model)
    loss_fn = nn.CrossEntropyLoss()
    start = time.perf_counter()
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True)
    done = 0
    while done < batches:
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            done += 1
            if done == batches:
                break
    return batches * BATCH / (time.perf_counter() - start)


class _Clock(pytorch.PyTorchCallback):
    def __init__(self) -> None:
        self.training_done = 0.0

    def on_validation_start(self) -> None:
        self.training_done = time.perf_counter()


class BenchTrial(pytorch.PyTorchTrial):
    """The raw loop's model, optimizer and data as a PyTorchTrial."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.dataset: torch.utils.data.TensorDataset = context.get_hparam("dataset")
        self.model = context.wrap_model(_model(context.get_hparam("kind")))
        self.opt = context.wrap_optimizer(_optimizer(self.model))
        self.loss_fn = nn.CrossEntropyLoss()
        self.clock = _Clock()

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            self.dataset, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        subset = torch.utils.data.Subset(self.dataset, range(BATCH))
        return pytorch.DataLoader(subset, batch_size=BATCH)

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        return {"clock": self.clock}

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        loss = self.loss_fn(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    # batch_idx is optional in overrides (the harness reads the signature), which mypy cannot know.
    def evaluate_batch(self, batch: Any) -> dict[str, Any]:  # type: ignore[override]
        x, y = batch
        return {"validation_loss": self.loss_fn(self.model(x), y)}


def run_harness(
    kind: str,
    batches: int,
    dataset: torch.utils.data.TensorDataset,
    system_interval: float | None = None,
) -> tuple[float, float]:
    """(samples/s of the training loop, seconds of the final validation + checkpoint).

    ``system_interval``: run the system-metrics sampler (off in local mode) every so many s.
    """
    hparams = {"global_batch_size": BATCH, "kind": kind, "dataset": dataset}
    with tempfile.TemporaryDirectory() as storage:
        with pytorch.init(hparams=hparams, checkpoint_storage=storage) as context:
            core = context._core
            if system_interval is not None:  # as core.init() starts it on a cluster's chief
                core.system_metrics = SystemMetricsSampler(
                    core.train._report_system, system_interval
                )
                core.system_metrics.start()
            trial = BenchTrial(context)
            trainer = pytorch.Trainer(trial, context)
            start = time.perf_counter()
            trainer.fit(max_length=pytorch.Batch(batches), checkpoint_policy="none")
            end = time.perf_counter()
    return batches * BATCH / (trial.clock.training_done - start), end - trial.clock.training_done


def measure(
    kind: str, batches: int, repeats: int, dataset: Any, threads: int
) -> dict[str, float | list[float]]:
    """Warm up both loops, then alternate them ``repeats`` times with ``threads`` torch threads;
    return medians."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return {f"{kind}_torch_threads": threads, **_alternate(kind, batches, repeats, dataset)}
    finally:
        torch.set_num_threads(previous)


def _alternate(
    kind: str, batches: int, repeats: int, dataset: Any
) -> dict[str, float | list[float]]:
    run_raw(kind, max(batches // 5, 10), dataset)
    run_harness(kind, max(batches // 5, 10), dataset)
    raw, harness, fixed = [], [], []
    for i in range(repeats):
        # Swap the order every repeat so neither loop always runs first.
        for which in ("raw", "harness") if i % 2 == 0 else ("harness", "raw"):
            if which == "raw":
                raw.append(run_raw(kind, batches, dataset))
            else:
                sps, cost = run_harness(kind, batches, dataset)
                harness.append(sps)
                fixed.append(cost)
    raw_sps, harness_sps = statistics.median(raw), statistics.median(harness)
    # Each raw/harness pair ran back to back under the same machine load, so the median of the
    # per-pair ratios is steadier than the ratio of medians on a shared machine.
    ratio = statistics.median(h / r for h, r in zip(harness, raw, strict=True))
    return {
        f"{kind}_raw_sps": round(raw_sps, 1),
        f"{kind}_harness_sps": round(harness_sps, 1),
        f"{kind}_ratio": round(ratio, 3),
        f"{kind}_ratio_range": [
            round(min(h / r for h, r in zip(harness, raw, strict=True)), 3),
            round(max(h / r for h, r in zip(harness, raw, strict=True)), 3),
        ],
        f"{kind}_overhead_us_per_batch": round((BATCH / harness_sps - BATCH / raw_sps) * 1e6, 1),
        f"{kind}_fixed_cost_s": round(statistics.median(fixed), 4),
    }


def measure_system_metrics(
    batches: int, repeats: int, dataset: Any, threads: int, interval: float
) -> dict[str, Any]:
    """The tiny harness with the system-metrics sampler off vs on, alternated (order swapped each
    pair), on ``threads`` torch threads. The sampler takes one sample every ``interval`` s, far
    more often than its 10 s default, so that its cost would show; the ratio (on / off) is the
    median of the per-pair ratios."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        run_harness("tiny", max(batches // 5, 10), dataset, system_interval=interval)
        off: list[float] = []
        on: list[float] = []
        for i in range(repeats):
            for sampled in (False, True) if i % 2 == 0 else (True, False):
                sps, _ = run_harness(
                    "tiny", batches, dataset, system_interval=interval if sampled else None
                )
                (on if sampled else off).append(sps)
    finally:
        torch.set_num_threads(previous)
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    return {
        "system_metrics_interval_s": interval,
        "system_metrics_off_sps": round(statistics.median(off), 1),
        "system_metrics_on_sps": round(statistics.median(on), 1),
        "system_metrics_ratio": round(statistics.median(ratios), 3),
        "system_metrics_ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny-batches", type=int, default=pick(2000, 50))
    parser.add_argument("--large-batches", type=int, default=pick(60, 3))
    parser.add_argument("--repeats", type=int, default=pick(9, 2))
    # One thread for the tiny model: its quantity is per-batch overhead, and on a busy 2-core
    # machine two intra-op threads made tiny pairs range from 0.70x to 30x.
    parser.add_argument("--tiny-threads", type=int, default=1)
    parser.add_argument("--large-threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--profile", action="store_true")
    # Seconds between system-metrics samples in the sampler on/off row (the default is 10 s).
    parser.add_argument("--system-interval", type=float, default=0.1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    dataset = _dataset()
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(run_harness, "tiny", args.tiny_batches, dataset)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    figures: dict[str, Any] = {"batch_size": BATCH}
    figures.update(measure("tiny", args.tiny_batches, args.repeats, dataset, args.tiny_threads))
    figures.update(measure("large", args.large_batches, args.repeats, dataset, args.large_threads))
    figures.update(
        measure_system_metrics(
            args.tiny_batches, args.repeats, dataset, args.tiny_threads, args.system_interval
        )
    )
    print(
        f"{'model':<8}{'raw samples/s':>16}{'harness samples/s':>20}{'ratio':>8}{'target':>8}"
        f"{'pair range':>14}{'µs/batch':>10}{'end cost s':>12}"
    )
    for kind, target in (("tiny", 0.85), ("large", 0.95)):
        print(
            f"{kind:<8}{figures[f'{kind}_raw_sps']:>16,.0f}{figures[f'{kind}_harness_sps']:>20,.0f}"
            f"{figures[f'{kind}_ratio']:>8.3f}{target:>8.2f}"
            f"{'-'.join(f'{r:.2f}' for r in figures[f'{kind}_ratio_range']):>14}"
            f"{figures[f'{kind}_overhead_us_per_batch']:>10.1f}{figures[f'{kind}_fixed_cost_s']:>12.3f}"
        )
    print(
        f"system metrics sampler on/off (tiny, one sample per {args.system_interval:g} s):"
        f" {figures['system_metrics_on_sps']:,.0f} / {figures['system_metrics_off_sps']:,.0f}"
        f" samples/s, ratio {figures['system_metrics_ratio']:.3f}"
        f" (pairs {'-'.join(f'{r:.3f}' for r in figures['system_metrics_ratio_range'])})"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
