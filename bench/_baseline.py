"""Measure an earlier commit in the same run: a benchmark's own script, from a temporary worktree.

A ratio against numbers taken an hour ago on a shared 2-core machine says little; the same
benchmark run back to back against the commit before a change, in one run, says what the change
did. ``run_baseline`` checks the commit out with ``git worktree add --detach`` into a temp
directory, puts this tree's ``bench/`` scripts over that commit's (the same instrument: the
figures, warm-ups and sizes of this run, measuring the old server code), runs the benchmark with
this interpreter (same virtualenv), and returns the JSON object its last line prints; the
worktree is removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _server import REPO

# Set in the baseline's environment so a baseline script that knows it does not recurse.
ENV = "HEADWAY_BENCH_BASELINE"


def wanted(default_ref: str) -> str | None:
    """The commit to measure beside this tree: ``$HEADWAY_BENCH_BASELINE`` or ``default_ref``;
    None when that is ``none`` (or empty), as it is inside a baseline run."""
    ref = os.environ.get(ENV, default_ref)
    return None if ref in ("", "none") else ref


def worktree(ref: str) -> tuple[Path, Callable[[], None]]:
    """A detached ``git worktree`` of ``ref`` in a temp directory, and the call that removes it.

    Raises:
        RuntimeError: ``git worktree add`` failed (unknown ref, not a git checkout).
    """
    where = Path(tempfile.mkdtemp(prefix="headway-baseline-"))
    tree = where / "tree"
    add = subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), ref],
        capture_output=True,
        text=True,
        check=False,
    )
    if add.returncode != 0:
        shutil.rmtree(where, ignore_errors=True)
        raise RuntimeError(f"git worktree add {ref} failed: {add.stderr.strip()}")

    def remove() -> None:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(where, ignore_errors=True)

    return tree, remove


def run_baseline(ref: str, script: str, args: list[str], timeout_s: float = 3600) -> dict[str, Any]:
    """Run ``bench/<script>`` as of commit ``ref``; return its last line's JSON object.

    Arguments:
        ref: anything ``git rev-parse`` takes (``HEAD~3``, a hash).
        script: the benchmark's file name, e.g. ``metrics_ingest.py``.
        args: its command-line arguments.

    Raises:
        RuntimeError: the commit cannot be checked out, or the script fails or prints no JSON.
    """
    tree, remove = worktree(ref)
    try:
        for script_file in (REPO / "bench").glob("*.py"):
            shutil.copy2(script_file, tree / "bench" / script_file.name)
        env = {**os.environ, ENV: "none"}
        print(f"measuring the baseline {ref} (its code, this {script}) ...", flush=True)
        proc = subprocess.run(
            [sys.executable, str(tree / "bench" / script), *args],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
            raise RuntimeError(
                f"baseline {ref} {script} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
            )
        return json.loads(lines[-1])
    finally:
        remove()


def ratios(current: dict[str, Any], baseline: dict[str, Any], keys: list[str]) -> dict[str, float]:
    """``{key: current / baseline}`` for each of ``keys`` both measured as non-zero numbers."""
    out: dict[str, float] = {}
    for key in keys:
        now, then = current.get(key), baseline.get(key)
        if isinstance(now, int | float) and isinstance(then, int | float) and then:
            out[key] = now / then
    return out


def compare(
    figures: dict[str, Any], baseline: dict[str, Any], ref: str, keys: list[str]
) -> dict[str, Any]:
    """Print this tree's figures beside the baseline commit's; return ``baseline_*``/``ratio_*``
    figures (ratio = this tree / baseline: above 1 is better for rates, below 1 for times)."""
    found = ratios(figures, baseline, keys)
    print(f"\nagainst the baseline {ref}, measured in this run before this tree:")
    out: dict[str, Any] = {}
    for key, ratio in found.items():
        print(f"  {key:32s} {baseline[key]:>12,.2f} -> {figures[key]:>12,.2f}  ({ratio:.2f}x)")
        out[f"baseline_{key}"] = baseline[key]
        out[f"ratio_{key}"] = round(ratio, 3)
    return out
