"""Harness A/B: the tiny-MLP harness of this tree and of an earlier commit, interleaved.

Run from the repository root: ``.venv/bin/python bench/harness_ab.py --baseline REF``
(not part of ``make bench``: it answers one question, "did this change move the per-batch
overhead on the wall clock?", which two runs of ``bench/harness_overhead.py`` minutes apart on
a shared 2-core machine cannot: the machine's load moves more between them than the ~10 us a
batch the tiny-MLP goal is about).

Each round runs bench/harness_overhead.py's tiny-model measurement (``measure("tiny", ...)``:
a warm-up, then ``--repeats`` raw / harness pairs on one torch thread) once on this tree and
once on REF's ``headway`` (a ``git worktree``, with this tree's ``bench/`` scripts: the same
instrument), each in a fresh process, the order swapped every round, so both codes see the same
stretch of the machine's load. Figures: per code the median over rounds of each round's ratio
(harness / raw samples per second) and per-batch overhead over raw (us), with their ranges, and
this tree's ratio over REF's. The last line printed is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from _baseline import worktree
from _pairs import median_range
from _server import REPO
from _tiny import pick

# One round's measurement, run in the tree being measured (its ``headway`` on sys.path first).
_ROUND = """
import json, sys, torch
sys.path[:0] = ["bench", "."]
import harness_overhead
figures = harness_overhead.measure(
    "tiny", {batches}, {repeats}, harness_overhead.dataset(), 1, torch.device("cpu")
)
print(json.dumps(figures))
"""


def run_round(tree: Path, batches: int, repeats: int) -> dict[str, Any]:
    """``harness_overhead.measure("tiny", ...)``'s figures with ``tree``'s code.

    Raises:
        RuntimeError: the measurement failed or printed no JSON object.
    """
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", _ROUND.format(batches=batches, repeats=repeats)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the round in {tree} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare with, e.g. HEAD~1")
    parser.add_argument("--rounds", type=int, default=pick(6, 2))
    parser.add_argument("--batches", type=int, default=pick(2000, 50))
    parser.add_argument("--repeats", type=int, default=pick(4, 2))
    args = parser.parse_args()
    if args.rounds < 1 or args.batches < 1 or args.repeats < 2 or args.repeats % 2:
        parser.error("--rounds and --batches must be >= 1, --repeats even and >= 2")
    base, remove = worktree(args.baseline)
    try:
        for script in (REPO / "bench").glob("*.py"):
            shutil.copy2(script, base / "bench" / script.name)
        trees = {"tree": REPO, "baseline": base}
        results: dict[str, list[dict[str, Any]]] = {"tree": [], "baseline": []}
        for i in range(args.rounds):
            order = ["tree", "baseline"] if i % 2 == 0 else ["baseline", "tree"]
            for name in order:
                figures = run_round(trees[name], args.batches, args.repeats)
                results[name].append(figures)
                print(
                    f"round {i + 1} {name:<8} ratio {figures['tiny_ratio']:.3f}"
                    f" {figures['tiny_ratio_range']}"
                    f"  over raw {figures['tiny_overhead_us_per_batch']:.1f} us a batch",
                    flush=True,
                )
    finally:
        remove()
    out: dict[str, Any] = {"baseline_ref": args.baseline, "rounds": args.rounds}
    for name, rounds in results.items():
        out[f"{name}_tiny_ratio"], out[f"{name}_tiny_ratio_range"] = median_range(
            [r["tiny_ratio"] for r in rounds], 4
        )
        out[f"{name}_overhead_us"], out[f"{name}_overhead_us_range"] = median_range(
            [r["tiny_overhead_us_per_batch"] for r in rounds], 1
        )
    out["tree_over_baseline"] = round(out["tree_tiny_ratio"] / out["baseline_tiny_ratio"], 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
