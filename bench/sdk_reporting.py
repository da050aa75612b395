"""SDK reporting from a trial: steps/s delivered through the Core API's batched reporter.

Run from the repository root: ``.venv/bin/python bench/sdk_reporting.py`` (``bench/metrics_ingest.py``
runs one pair of it per backend too, so ``make bench`` reports it).

For SQLite (a fresh temp file) and PostgreSQL (``headway_bench_sdk``, recreated; skipped with a
note when unreachable) this starts the web server the embedded setup runs (``manage.py
runserver``) and times a stand-in training loop (a 64x64 matmul + tanh per step on one torch
thread, ~10-20 us) in pairs, the order swapped every pair so that the machine's load hits both
alike:

- loop alone: the loop with reporting off;
- reporting: the same loop calling ``core.train.report_training_metrics(step, {"loss": x})``
  every step (a 0-d tensor, as a training loop has it) on a ``RegistryMetricReporter`` (what
  ``core.init()`` builds on a cluster) to the live server, until ``train.flush()`` returns.

Figures per backend: delivered steps/s (steps / (loop + flush) wall time; median of the pairs and
its range), the loop alone's steps/s, the loop's own speed while reporting, the trial process's
CPU per step (main and reporter threads) for both and their difference (what reporting costs the
trial process), the server's CPU per step, and the 1-minute load average before and after. Each
reporting run writes a fresh trial, read back afterwards: every step once, in order (nothing lost
or duplicated). Target: >= 50,000 steps/s on both databases. ``--baseline REF``
first runs this script over commit ``REF``'s code (``bench/_baseline.py``) and prints ratios. ``--profile`` prints a
cProfile of the per-call path in the trial process (all threads' time lands in the main thread's
calls only, so it is the caller's cost). The last line printed is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _baseline import compare, run_baseline, wanted
from _server import Backend, Server, backend_factories, single_file_model_definition
from _tiny import pick

POSTGRES_URL = os.environ.get(
    "HEADWAY_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/headway_bench_sdk"
)
STEPS = pick(200_000, 5_000)
TARGET_STEPS_PER_S = 50_000
CONFIG = """\
name: sdk-reporting-bench
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
"""


def create_trial(url: str, token: str) -> int:
    """Create a single-trial experiment over REST and return its trial id."""
    headers = {"Authorization": f"Token {token}"}
    body = {
        "config": CONFIG,
        "model_definition": single_file_model_definition("train.py", "print('bench')\n"),
    }
    resp = requests.post(f"{url}/api/v1/experiments/", json=body, headers=headers, timeout=30)
    resp.raise_for_status()
    trials = requests.get(
        f"{url}/api/v1/experiments/{resp.json()['id']}/trials/", headers=headers, timeout=30
    )
    trials.raise_for_status()
    data = trials.json()
    return int((data["results"] if isinstance(data, dict) else data)[0]["id"])


def training_loop(steps: int, report: Callable[[int, Any], None]) -> tuple[float, float]:
    """A stand-in training step (a 64x64 matmul + tanh, ~10-20 us) per step.

    ``report(step, loss)`` is called each step with a 0-d tensor (a no-op for the loop alone).
    Returns (wall seconds, this process's CPU seconds).
    """
    import torch

    # One thread: the server shares this machine's cores, and a 2-thread OpenMP matmul whose
    # second core is busy with the server spin-waits (8x slower), which is not the SDK's cost.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    w = torch.randn(64, 64) * 0.1
    x = torch.randn(8, 64)
    t0, c0 = time.perf_counter(), time.process_time()
    for step in range(1, steps + 1):
        x = torch.tanh(x @ w)
        report(step, x[0, 0])
    return time.perf_counter() - t0, time.process_time() - c0


def run_reporting(url: str, token: str, trial_id: int, steps: int) -> dict[str, float]:
    """One reporting run into ``trial_id``: the loop reporting every step, then ``flush()``.

    Returns wall and CPU seconds of the loop and of loop + flush (delivery).
    """
    from headway.client import Session
    from headway.core._distributed import DistributedContext
    from headway.core._metrics import RegistryMetricReporter
    from headway.core._train import TrainContext

    reporter = RegistryMetricReporter(Session(url, token=token), trial_id)
    train = TrainContext(sink=reporter, distributed=DistributedContext.single())
    report = train.report_training_metrics
    t0, c0 = time.perf_counter(), time.process_time()
    loop_s, _ = training_loop(steps, lambda step, loss: report(step, {"loss": loss}))
    train.flush()
    delivered_s, delivered_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    error = reporter.close(timeout=10)
    if error is not None:
        raise error
    return {"loop_s": loop_s, "delivered_s": delivered_s, "delivered_cpu_s": delivered_cpu_s}


def bench_sdk(url: str, token: str, trial_id: int, steps: int = STEPS) -> dict[str, float]:
    """One pair (loop alone, then reporting into ``trial_id``): ``bench/metrics_ingest.py``'s row.

    Keys: ``sdk_steps_per_s`` (delivered), ``sdk_loop_slowdown`` (loop while reporting / loop
    alone), ``sdk_baseline_loop_steps_per_s`` (the loop alone).
    """
    baseline_s, _ = training_loop(steps, lambda step, loss: None)
    run = run_reporting(url, token, trial_id, steps)
    return {
        "sdk_steps_per_s": steps / run["delivered_s"],
        "sdk_loop_slowdown": run["loop_s"] / baseline_s,
        "sdk_baseline_loop_steps_per_s": steps / baseline_s,
    }


def verify(url: str, token: str, trial_id: int, steps: int) -> bool:
    """Whether the trial's ``loss`` series reads back as steps 1..``steps``, each once."""
    params: dict[str, str | int] = {"max_points": 0, "name": "loss"}
    resp = requests.get(
        f"{url}/api/v1/trials/{trial_id}/metrics/",
        params=params,
        headers={"Authorization": f"Token {token}"},
        timeout=120,
    )
    resp.raise_for_status()
    series = resp.json()["series"]
    return (
        len(series) == 1
        and series[0]["count"] == steps
        and series[0]["steps"] == list(range(1, steps + 1))
    )


def _stats(values: list[float], digits: int = 1) -> tuple[float, list[float]]:
    return round(statistics.median(values), digits), [
        round(min(values), digits),
        round(max(values), digits),
    ]


def measure(backend: Backend, token: str, steps: int, pairs: int) -> dict[str, Any]:
    """``pairs`` interleaved (loop alone, reporting) pairs against one server of ``backend``."""
    out: dict[str, Any] = {"load_before": round(os.getloadavg()[0], 2)}
    alone_sps, alone_cpu, sdk_sps, loop_sps, sdk_cpu, server_cpu = [], [], [], [], [], []
    verified = True
    with Server(backend, "runserver") as server:
        run_reporting(server.url, token, create_trial(server.url, token), max(steps // 10, 100))
        training_loop(max(steps // 10, 100), lambda step, loss: None)  # warm-ups
        for i in range(pairs):
            for reporting in (False, True) if i % 2 == 0 else (True, False):
                if not reporting:
                    wall, cpu = training_loop(steps, lambda step, loss: None)
                    alone_sps.append(steps / wall)
                    alone_cpu.append(cpu * 1e6 / steps)
                    continue
                trial_id = create_trial(server.url, token)
                cpu0 = server.cpu_seconds()
                run = run_reporting(server.url, token, trial_id, steps)
                server_cpu.append((server.cpu_seconds() - cpu0) * 1e6 / steps)
                sdk_sps.append(steps / run["delivered_s"])
                loop_sps.append(steps / run["loop_s"])
                sdk_cpu.append(run["delivered_cpu_s"] * 1e6 / steps)
                verified = verified and verify(server.url, token, trial_id, steps)
    out["steps_per_s"], out["steps_per_s_range"] = _stats(sdk_sps, 0)
    out["loop_alone_steps_per_s"], out["loop_alone_steps_per_s_range"] = _stats(alone_sps, 0)
    out["loop_while_reporting_steps_per_s"], _ = _stats(loop_sps, 0)
    out["trial_cpu_us_per_step"], _ = _stats(sdk_cpu)
    out["loop_alone_cpu_us_per_step"], _ = _stats(alone_cpu)
    # What reporting costs the trial process per step (caller + reporter thread), pairwise.
    diffs = [s - a for s, a in zip(sdk_cpu, alone_cpu, strict=True)]
    out["reporting_cpu_us_per_step"], out["reporting_cpu_us_per_step_range"] = _stats(diffs)
    out["server_cpu_us_per_step"], _ = _stats(server_cpu)
    out["verified"] = verified
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def profile_calls(steps: int) -> None:
    """cProfile the caller's side of ``report_training_metrics`` (a sink that only encodes)."""
    from headway.core._distributed import DistributedContext
    from headway.core._metrics import LocalMetricSink, _encode
    from headway.core._train import TrainContext

    class _Queued(LocalMetricSink):
        """``RegistryMetricReporter.submit``'s work in the caller's thread (encode, append)."""

        def submit(self, report: dict[str, Any], *, raise_pending: bool = True) -> None:
            self.reports.append(_encode(report))  # type: ignore[arg-type]

    train = TrainContext(sink=_Queued(), distributed=DistributedContext.single())
    profiler = cProfile.Profile()
    profiler.runcall(
        training_loop, steps, lambda s, loss: train.report_training_metrics(s, {"loss": loss})
    )
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--pairs", type=int, default=pick(5, 1), help="0: only --profile")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--baseline",
        metavar="REF",
        default="none",
        help="first measure this commit's code with this script (bench/_baseline.py)",
    )
    args = parser.parse_args()
    if args.profile:
        profile_calls(args.steps)
    baseline_ref = wanted(args.baseline)
    baseline: dict[str, Any] = {}
    if baseline_ref is not None and args.pairs > 0:
        forwarded = ["--steps", str(args.steps), "--pairs", str(args.pairs)]
        baseline = run_baseline(
            baseline_ref, Path(__file__).name, forwarded + (["--no-postgres"] * args.no_postgres)
        )
    figures: dict[str, Any] = {"steps": args.steps, "pairs": args.pairs}
    measuring = args.pairs > 0
    for make in backend_factories(POSTGRES_URL, postgres=measuring and not args.no_postgres):
        if not measuring:
            break
        backend = make()
        try:
            token = backend.prepare()
            print(f"measuring {backend.label} ...", flush=True)
            result = measure(backend, token, args.steps, args.pairs)
        finally:
            backend.cleanup()
        result["target_met"] = result["steps_per_s"] >= TARGET_STEPS_PER_S
        figures.update({f"{backend.label}_{k}": v for k, v in result.items()})
        print(
            f"{backend.label}: {result['steps_per_s']:,.0f} steps/s delivered "
            f"({result['steps_per_s_range'][0]:,.0f}-{result['steps_per_s_range'][1]:,.0f}); "
            f"loop alone {result['loop_alone_steps_per_s']:,.0f}; reporting costs the trial "
            f"{result['reporting_cpu_us_per_step']} us CPU a step, the server "
            f"{result['server_cpu_us_per_step']} us; verified {result['verified']}; load "
            f"{result['load_before']}-{result['load_after']} (target >= {TARGET_STEPS_PER_S:,})",
            flush=True,
        )
    if baseline:
        keys = [
            f"{label}_{name}"
            for label in ("sqlite", "postgres")
            for name in ("steps_per_s", "reporting_cpu_us_per_step", "server_cpu_us_per_step")
        ]
        figures.update(compare(figures, baseline, str(baseline_ref), keys))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
