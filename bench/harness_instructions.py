"""Harness overhead in instructions: what the harness executes per batch beyond raw PyTorch.

Run from the repository root: ``.venv/bin/python bench/harness_instructions.py [--baseline REF]``
(needs ``valgrind``; not part of ``make bench``: a run takes 10-15 minutes, most of it importing
torch under valgrind).

Wall and CPU time on a busy 2-core machine move by hundreds of microseconds a batch between runs
(bench/harness_overhead.py), far more than the ~10 us the tiny-MLP goal is about; instruction
counts do not move with other people's load. This runs bench/harness_overhead.py's raw loop and
harness (``run_raw`` / ``run_harness``, tiny MLP, one torch thread, CPU) under ``valgrind
--tool=callgrind``, which writes its counts at every ``os.sched_yield()``: raw and harness at
``--batches-1`` and again at ``--batches-2`` batches, so the per-batch slope of each leaves
``fit()``'s one-off start and end out. Figures: instructions a batch for raw and harness, the
difference, and raw / harness. One caveat: the harness's TensorBoard writer flushes at most once
a second, and valgrind runs ~50 times slower, so here it flushes at nearly every report (every
100 batches): a few thousand instructions a batch that a native run does not spend.

``--baseline REF`` measures commit REF's ``headway`` package (a ``git worktree``) with this
tree's bench scripts at the same time, in a second valgrind, and prints both. The last line
printed is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


def child(batches: tuple[int, int]) -> None:
    """Inside valgrind: raw, harness at each size, a dump before each (``sched_yield``)."""
    import torch
    from _harness_models import dataset, run_raw
    from harness_overhead import run_harness

    torch.set_num_threads(1)
    data, cpu = dataset(), torch.device("cpu")
    run_raw("tiny", 50, data, cpu)
    run_harness("tiny", 50, data, cpu)
    for n in batches:
        os.sched_yield()
        run_raw("tiny", n, data, cpu)
        os.sched_yield()
        run_harness("tiny", n, data, cpu)
    os.sched_yield()


def start(batches: tuple[int, int], out: Path, headway_root: Path) -> subprocess.Popen[bytes]:
    """valgrind on ``child`` with ``headway`` imported from ``headway_root``."""
    env = {**os.environ, "PYTHONPATH": f"{headway_root}{os.pathsep}{BENCH}"}
    return subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=sched_yield",
            f"--callgrind-out-file={out / 'cg.out'}",
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            *map(str, batches),
        ],
        env=env,
        cwd=out,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def figures(out: Path, batches: tuple[int, int]) -> dict[str, Any]:
    """Per-batch instruction counts from dumps 2-5 (raw n1, harness n1, raw n2, harness n2)."""
    totals = []
    for part in (2, 3, 4, 5):
        text = (out / f"cg.out.{part}").read_text()
        totals.append(
            next(int(line.split()[1]) for line in text.splitlines() if line.startswith("summary:"))
        )
    n1, n2 = batches
    raw = (totals[2] - totals[0]) / (n2 - n1)
    harness = (totals[3] - totals[1]) / (n2 - n1)
    return {
        "raw_instructions_per_batch": round(raw),
        "harness_instructions_per_batch": round(harness),
        "over_raw_per_batch": round(harness - raw),
        "ratio": round(raw / harness, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches-1", type=int, default=200)
    parser.add_argument("--batches-2", type=int, default=700)
    parser.add_argument("--baseline", help="a commit whose headway package to measure as well")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child((args.child[0], args.child[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    batches = (args.batches_1, args.batches_2)
    runs: dict[str, tuple[Path, Path]] = {"this_tree": (BENCH.parent, Path(tempfile.mkdtemp()))}
    cleanups = []
    if args.baseline:
        sys.path.insert(0, str(BENCH))
        from _baseline import worktree

        tree, remove = worktree(args.baseline)
        cleanups.append(remove)
        runs["baseline"] = (tree, Path(tempfile.mkdtemp()))
    try:
        procs = {name: start(batches, out, root) for name, (root, out) in runs.items()}
        for name, proc in procs.items():
            if proc.wait() != 0:
                raise SystemExit(f"{name}: valgrind exited {proc.returncode}")
        result: dict[str, Any] = {"batches": list(batches), "baseline_ref": args.baseline}
        for name, (_, out) in runs.items():
            result[name] = figures(out, batches)
            print(f"{name:10s} " + ", ".join(f"{k} {v:,}" for k, v in result[name].items()))
    finally:
        for _, out in runs.values():
            shutil.rmtree(out, ignore_errors=True)
        for remove in cleanups:
            remove()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
