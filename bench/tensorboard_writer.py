"""Automatic TensorBoard logging of per-step reports: steps/s until written, Headway's writer vs
TensorBoard's ``SummaryWriter``.

Run from the repository root: ``.venv/bin/python bench/tensorboard_writer.py`` (``make bench``).

On a cluster ``core.init()`` (``TensorboardMode.AUTO``) writes every reported training metric to
the trial's TensorBoard folder from a thread of its own (``headway.core._tensorboard``). A
Core API loop that reports every step (``report_training_metrics(step, {"loss": x})``) makes one
event a step, so that thread must keep up with the SDK's reporting goal (50,000
steps/s). Each run reports ``--steps`` steps through one ``TensorboardFiles`` as fast as the loop
can, then waits until everything is written (``drain()``, what a checkpoint does), with:

- baseline: the events written by ``torch.utils.tensorboard.SummaryWriter.add_scalar``, the
  writer Headway used before (TensorBoard's own path without TensorFlow);
- headway: ``headway.core._tb_event_file.ScalarEventFile`` (one buffered file, one record a
  step, C CRC-32C).

Runs alternate in pairs, the order swapped every pair (bench/_pairs.py), ``--repeats`` pairs.
Figures: steps/s until written (median and range) per side, the per-pair ratio headway /
baseline (median and range), the report call's cost in the loop's thread and the process's CPU
per step (both threads), and whether every step was read back from the event files by
TensorBoard's reader (``verified``). Baseline and target: the baseline is measured in the same
run; the target is >= 50,000 steps/s (the SDK reporting goal). The last line printed is a JSON
object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time
from typing import Any

from _pairs import alternate_pairs, median_range
from _tiny import pick

from headway.core import _tensorboard

TARGET_STEPS_PER_S = 50_000


class _SummaryWriterEvents:
    """The baseline: the writer interface of ``ScalarEventFile`` over ``SummaryWriter``."""

    def __init__(self, path: pathlib.Path) -> None:
        self.writer = _tensorboard.make_summary_writer(path)

    def add_scalars(self, step: int, scalars: Any) -> None:
        for tag, value in scalars:
            self.writer.add_scalar(tag, value, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def run(steps: int, baseline: bool) -> dict[str, Any]:
    """Report ``steps`` steps through a fresh ``TensorboardFiles`` and wait until written."""
    with tempfile.TemporaryDirectory() as folder:
        files = _tensorboard.TensorboardFiles(
            mode=_tensorboard.TensorboardMode.AUTO, trial_id=1, rank=0, auto_write=True
        )
        files._path = pathlib.Path(folder)
        if baseline:
            files._writer = _SummaryWriterEvents(files.path)  # type: ignore[assignment]
        start, cpu = time.perf_counter(), time.process_time()
        for step in range(1, steps + 1):
            files.write_metrics("training", step, {"loss": 1.0 / step})
        reported = time.perf_counter() - start
        files.drain()
        wall = time.perf_counter() - start
        cpu_s = time.process_time() - cpu
        files.close()
        read = _steps_read(pathlib.Path(folder))
    return {
        "steps_per_s": steps / wall,
        "report_us_per_step": reported * 1e6 / steps,
        "cpu_us_per_step": cpu_s * 1e6 / steps,
        "verified": read == list(range(1, steps + 1)),
    }


def _steps_read(folder: pathlib.Path) -> list[int]:
    """Every step of ``Headway/loss`` in the folder's event files, as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps: list[int] = []
    for events in sorted(folder.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
        accumulator.Reload()
        if "Headway/loss" in accumulator.Tags()["scalars"]:
            steps.extend(e.step for e in accumulator.Scalars("Headway/loss"))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=pick(50_000, 500))
    parser.add_argument("--repeats", type=int, default=pick(4, 1))
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    run(pick(2_000, 100), baseline=False)  # warm-up: imports, the protos, the first file
    base, head = alternate_pairs(
        lambda: run(args.steps, baseline=True),
        lambda: run(args.steps, baseline=False),
        args.repeats,
    )
    ratios = [h["steps_per_s"] / b["steps_per_s"] for b, h in zip(base, head, strict=True)]
    figures: dict[str, Any] = {"steps": args.steps, "pairs": args.repeats}
    for name, runs in (("baseline", base), ("headway", head)):
        rate, rate_range = median_range([r["steps_per_s"] for r in runs], 0)
        figures[f"{name}_steps_per_s"] = rate
        figures[f"{name}_steps_per_s_range"] = rate_range
        figures[f"{name}_report_us_per_step"] = round(
            statistics.median(r["report_us_per_step"] for r in runs), 2
        )
        figures[f"{name}_cpu_us_per_step"] = round(
            statistics.median(r["cpu_us_per_step"] for r in runs), 2
        )
    figures["ratio"], figures["ratio_range"] = median_range(ratios)
    figures["verified"] = all(r["verified"] for r in base + head)
    figures["target_met"] = figures["headway_steps_per_s"] >= TARGET_STEPS_PER_S
    print(f"{'writer':22s} {'steps/s':>10s} {'range':>21s} {'report us':>9s} {'CPU us/step':>11s}")
    for name, label in (("baseline", "SummaryWriter"), ("headway", "ScalarEventFile")):
        low, high = figures[f"{name}_steps_per_s_range"]
        print(
            f"{label:22s} {figures[f'{name}_steps_per_s']:>10,.0f} "
            f"{f'{low:,.0f}-{high:,.0f}':>21s} {figures[f'{name}_report_us_per_step']:>9.2f} "
            f"{figures[f'{name}_cpu_us_per_step']:>11.2f}"
        )
    print(
        f"ratio headway / baseline {figures['ratio']} {figures['ratio_range']}; "
        f"target >= {TARGET_STEPS_PER_S:,} steps/s: "
        f"{'met' if figures['target_met'] else 'not met'}; verified {figures['verified']}"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
