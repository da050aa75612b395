"""Harness overhead: samples/s of one training loop under ``headway.pytorch`` vs raw PyTorch.

Run from the repository root: ``.venv/bin/python bench/harness_overhead.py`` (``make bench``).

Two models on scikit-learn's digits (1,437 training images as 64 features, batch 32, SGD with
momentum, shuffled every epoch):

- tiny: MLP 64-128-10, where per-batch harness work is most visible;
- large: MLP 64-2048-2048-2048-10, compute-bound (what the harness should not slow down).

Raw: ``for x, y in torch.utils.data.DataLoader(..., shuffle=True)`` + forward / backward / step.
Harness: the same model as a ``PyTorchTrial`` run by ``Trainer.fit(max_length=Batch(n))`` in
local mode (training metrics returned as tensors each batch, averaged and reported every 100
batches, automatic TensorBoard logging on, preemption checked every batch). The harness loop is
timed from the first epoch's start until the final validation starts (bench/_clock.py's
``TrainingClock``), so every batch, data-loader iterator, metric report and preemption check is
in it; what ``fit()`` does once before the first batch ("start": loaders, callbacks, the model
code snapshot) and after the last ("end": validation + checkpoint) is timed separately, and
``*_ratio_with_start`` counts the start in. After a warm-up, raw and harness runs alternate
(``bench/_pairs.py``: order swapped each pair) ``--repeats`` times; each ratio is the median of
the per-pair ratios with its range (each pair ran back to back under the same machine load),
beside the same ratio of this process's CPU time per batch (equal CPU with unequal wall time is
the machine's load, not the harness's work) and the 1-minute load average before and after.
The tiny model runs on one torch thread (``--tiny-threads``: its quantity is per-batch overhead,
which two threads on a busy 2-core machine drown in noise), the large one on the default.
Targets: >= 0.97x raw on the tiny model (<= 11 us a batch), >= 0.99x on the large
one. ``--device cuda`` puts every model and batch on ``cuda:0`` (default ``cpu``, also on a GPU
host: the harness's own choice, ``cuda:0`` whenever CUDA is available, is overridden so that
all loops share one device), each batch copied there as the harness copies it, and the clocks
are read after a synchronize.

Peers are not dependencies. Lightning, when ``lightning`` (or ``pytorch_lightning``) imports:
the same models as a ``LightningModule`` under ``Trainer(max_steps=n, logger=False,
enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
accelerator=<device>, devices=1)`` (bench/_lightning_peer.py), in raw vs Lightning pairs
alternated like raw vs harness, with the same threads; the JSON's ``"lightning"`` holds its
figures, or null when it is not installed. Determined: the JSON only says whether it is
installed (docs/performance.md quotes its figures from an earlier run). ``--profile`` prints
a cProfile of one tiny harness run; bench/harness_instructions.py counts the instructions the
harness runs per batch beyond raw, which a busy machine's load does not move. A last row runs the tiny harness with the system-metrics
sampler (``headway.core._system_metrics``) off and on, alternated, sampling every
``--system-interval`` s (0.1: 100 times its default rate, so that its cost would show).
The last line printed is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib.util
import json
import logging
import os
import pstats
import statistics
import tempfile
import time
from typing import Any

import torch
from _clock import TrainingClock
from _harness_models import (
    BATCH,
    dataset,
    model,
    optimizer,
    pick_device,
    run_raw,
    sync,
    torch_threads,
)
from _lightning_peer import lightning_version, quiet, run_lightning
from _pairs import median_range, pair_figures, warm_then_alternate
from _tiny import pick
from torch import nn

from headway import pytorch
from headway.core._system_metrics import SystemMetricsSampler


class _Clock(TrainingClock):
    """``TrainingClock`` plus this process's CPU time at the same two instants (and, on a GPU,
    a synchronize before the first as before the second)."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self.cpu_started = 0.0
        self.cpu_done = 0.0

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        if not self.training_started:
            sync(self.device or torch.device("cpu"))
            self.cpu_started = time.process_time()
        super().on_training_epoch_start(epoch_idx)

    def on_validation_start(self) -> None:
        super().on_validation_start()
        self.cpu_done = time.process_time()


class BenchTrial(pytorch.PyTorchTrial):
    """The raw loop's model, optimizer and data as a PyTorchTrial."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.dataset: torch.utils.data.TensorDataset = context.get_hparam("dataset")
        self.model = context.wrap_model(model(context.get_hparam("kind")))
        self.opt = context.wrap_optimizer(optimizer(self.model))
        self.loss_fn = nn.CrossEntropyLoss()
        self.clock = _Clock(context.device)

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
    device: torch.device,
    system_interval: float | None = None,
) -> dict[str, float]:
    """One ``Trainer.fit()`` of ``batches`` batches of ``BenchTrial`` in local mode.

    Returns ``samples_per_s`` and ``cpu_us_per_batch`` of the training loop (from the first
    epoch's start to the final validation's start: every batch, report and preemption check),
    ``start_s`` (``fit()`` until the first batch: loaders, callbacks, the model code snapshot),
    ``end_s`` (the final validation + checkpoint) and ``with_start_samples_per_s`` (the loop
    with its start). ``device``: where the model and batches go (the harness would pick
    ``cuda:0`` whenever CUDA is available; the benchmark sets it so that raw, harness and
    Lightning train on one device). ``system_interval``: run the system-metrics sampler (off in
    local mode) every so many s.
    """
    hparams = {"global_batch_size": BATCH, "kind": kind, "dataset": dataset}
    with (
        tempfile.TemporaryDirectory() as storage,
        pytorch.init(hparams=hparams, checkpoint_storage=storage) as context,
    ):
        context.device = device
        core = context._core
        if system_interval is not None:  # as core.init() starts it on a cluster's chief
            core.system_metrics = SystemMetricsSampler(core.train._report_system, system_interval)
            core.system_metrics.start()
        trial = BenchTrial(context)
        trainer = pytorch.Trainer(trial, context)
        start = time.perf_counter()
        trainer.fit(max_length=pytorch.Batch(batches), checkpoint_policy="none")
        end = time.perf_counter()
    clock = trial.clock
    return {
        "samples_per_s": batches * BATCH / (clock.training_done - clock.training_started),
        "cpu_us_per_batch": (clock.cpu_done - clock.cpu_started) * 1e6 / batches,
        "start_s": clock.training_started - start,
        "end_s": end - clock.training_done,
        "with_start_samples_per_s": batches * BATCH / (clock.training_done - start),
    }


def measure(
    kind: str, batches: int, repeats: int, dataset: Any, threads: int, device: torch.device
) -> dict[str, Any]:
    """Warm up both loops, then alternate raw and harness ``repeats`` times with ``threads``
    torch threads; return medians and per-pair ratios."""
    with torch_threads(threads):
        raw, harness = warm_then_alternate(
            lambda n: run_raw(kind, n, dataset, device),
            lambda n: run_harness(kind, n, dataset, device),
            batches,
            repeats,
        )
    out: dict[str, Any] = {f"{kind}_torch_threads": threads}
    out.update({f"{kind}_{k}": v for k, v in pair_figures(harness, raw, "harness", BATCH).items()})
    # With fit()'s start counted in (the definition before the second round of overhead work).
    out[f"{kind}_ratio_with_start"], _ = median_range(
        [
            h["with_start_samples_per_s"] / r["samples_per_s"]
            for h, r in zip(harness, raw, strict=True)
        ]
    )
    out[f"{kind}_start_cost_s"] = round(statistics.median(h["start_s"] for h in harness), 4)
    out[f"{kind}_fixed_cost_s"] = round(statistics.median(h["end_s"] for h in harness), 4)
    return out


def measure_lightning(
    sizes: dict[str, tuple[int, int]], repeats: int, dataset: Any, device: torch.device
) -> dict[str, Any] | None:
    """The Lightning peer: raw vs Lightning pairs, alternated as raw vs harness, per model
    (``sizes``: kind -> (batches, torch threads)); None when Lightning is not installed."""
    version = lightning_version()
    if version is None:
        return None
    quiet()
    out: dict[str, Any] = {"version": version}
    for kind, (batches, threads) in sizes.items():
        with torch_threads(threads):
            raw, peer = warm_then_alternate(
                functools.partial(run_raw, kind, data=dataset, device=device),
                functools.partial(run_lightning, kind, data=dataset, device=device),
                batches,
                repeats,
            )
        out.update(
            {f"{kind}_{k}": v for k, v in pair_figures(peer, raw, "lightning", BATCH).items()}
        )
    return out


def measure_system_metrics(
    batches: int, repeats: int, dataset: Any, threads: int, interval: float, device: torch.device
) -> dict[str, Any]:
    """The tiny harness with the system-metrics sampler off vs on, alternated (order swapped each
    pair), on ``threads`` torch threads. The sampler takes one sample every ``interval`` s, far
    more often than its 10 s default, so that its cost would show; the ratio (on / off) is the
    median of the per-pair ratios."""
    with torch_threads(threads):
        off, on = warm_then_alternate(
            lambda n: run_harness("tiny", n, dataset, device),
            lambda n: run_harness("tiny", n, dataset, device, system_interval=interval),
            batches,
            repeats,
        )
    ratios = [a["samples_per_s"] / b["samples_per_s"] for a, b in zip(on, off, strict=True)]
    return {
        "system_metrics_interval_s": interval,
        "system_metrics_off_sps": round(statistics.median(r["samples_per_s"] for r in off), 1),
        "system_metrics_on_sps": round(statistics.median(r["samples_per_s"] for r in on), 1),
        "system_metrics_ratio": round(statistics.median(ratios), 3),
        "system_metrics_ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny-batches", type=int, default=pick(2000, 50))
    parser.add_argument("--large-batches", type=int, default=pick(60, 3))
    # Even: as many pairs run raw first as harness first (see _alternate).
    parser.add_argument("--repeats", type=int, default=pick(10, 2))
    # One thread for the tiny model: its quantity is per-batch overhead, and on a busy 2-core
    # machine two intra-op threads made tiny pairs range from 0.70x to 30x.
    parser.add_argument("--tiny-threads", type=int, default=1)
    parser.add_argument("--large-threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--profile", action="store_true")
    # Seconds between system-metrics samples in the sampler on/off row (the default is 10 s).
    parser.add_argument("--system-interval", type=float, default=0.1)
    args = parser.parse_args()
    device = pick_device(args.device)
    logging.basicConfig(level=logging.WARNING)
    data = dataset()
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(run_harness, "tiny", args.tiny_batches, data, device)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    figures: dict[str, Any] = {
        "batch_size": BATCH,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "load_before": _load(),
    }
    sizes = {
        "tiny": (args.tiny_batches, args.tiny_threads),
        "large": (args.large_batches, args.large_threads),
    }
    for kind, (batches, threads) in sizes.items():
        figures.update(measure(kind, batches, args.repeats, data, threads, device))
    # Peers in the same run where installed: none is a dependency.
    figures["lightning"] = measure_lightning(sizes, args.repeats, data, device)
    figures["peers"] = {
        "lightning": "not installed"
        if figures["lightning"] is None
        else f"{figures['lightning']['version']} measured",
        "determined": "installed, not measured by this script"
        if importlib.util.find_spec("determined")
        else "not installed",
    }
    figures.update(
        measure_system_metrics(
            args.tiny_batches, args.repeats, data, args.tiny_threads, args.system_interval, device
        )
    )
    figures["load_after"] = _load()
    _print_table(figures, args.system_interval)
    print(json.dumps(figures))


def _print_table(figures: dict[str, Any], system_interval: float) -> None:
    print(
        f"{'model':<16}{'raw sps':>9}{'other sps':>10}{'ratio':>7}{'pair range':>12}"
        f"{'us/batch':>9}{'CPU ratio':>10}{'CPU range':>12}{'CPU us/b':>9}"
        f"{'w/ start':>9}{'start s':>8}{'end s':>7}"
    )
    peer = figures["lightning"] or {}
    for kind, name, rows in [(k, "harness", figures) for k in ("tiny", "large")] + [
        (k, "lightning", peer) for k in ("tiny", "large") if peer
    ]:
        f = {k.removeprefix(f"{kind}_"): v for k, v in rows.items() if k.startswith(kind)}
        print(
            f"{kind + ' ' + name:<16}{f['raw_sps']:>9,.0f}{f[f'{name}_sps']:>10,.0f}"
            f"{f['ratio']:>7.3f}{'-'.join(f'{r:.3f}' for r in f['ratio_range']):>12}"
            f"{f['overhead_us_per_batch']:>9.1f}{f['cpu_ratio']:>10.3f}"
            f"{'-'.join(f'{r:.3f}' for r in f['cpu_ratio_range']):>12}"
            f"{f['cpu_overhead_us_per_batch']:>9.1f}"
            + (
                f"{f['ratio_with_start']:>9.3f}{f['start_cost_s']:>8.3f}{f['fixed_cost_s']:>7.3f}"
                if name == "harness"
                else ""
            )
        )
    print(
        f"device {figures['device']}; targets: tiny >= 0.97 (<= 11 us a batch), large >= 0.99;"
        " peers: "
        + ", ".join(f"{k} {v}" for k, v in figures["peers"].items())
        + f"; load average {figures['load_before']} -> {figures['load_after']}"
    )
    print(
        f"system metrics sampler on/off (tiny, one sample per {system_interval:g} s):"
        f" {figures['system_metrics_on_sps']:,.0f} / {figures['system_metrics_off_sps']:,.0f}"
        f" samples/s, ratio {figures['system_metrics_ratio']:.3f}"
        f" (pairs {'-'.join(f'{r:.3f}' for r in figures['system_metrics_ratio_range'])})"
    )


def _load() -> float:
    """The 1-minute load average (the machine is shared: read the ratios beside it)."""
    return round(os.getloadavg()[0], 2)


if __name__ == "__main__":
    main()
