"""bench/harness_ab.py (not part of ``make bench``) runs in tiny mode and ends with its JSON line.

Only the shape is checked, never a number; the baseline is this very commit (``HEAD``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO


@pytest.mark.slow
def test_an_interleaved_a_b_against_head_prints_both_codes_figures() -> None:
    env = {**os.environ, "HEADWAY_BENCH_TINY": "1"}
    done = subprocess.run(
        [sys.executable, "bench/harness_ab.py", "--baseline", "HEAD"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    figures = json.loads(lines[-1])
    assert figures["baseline_ref"] == "HEAD" and figures["rounds"] == 2
    for code in ("tree", "baseline"):
        low, high = figures[f"{code}_tiny_ratio_range"]
        assert low <= figures[f"{code}_tiny_ratio"] <= high
        assert f"{code}_overhead_us" in figures
    assert figures["tree_over_baseline"] > 0
    # Both codes ran in every round, the order swapped between rounds.
    assert [line.split()[2] for line in lines if line.startswith("round")] == [
        "tree", "baseline", "baseline", "tree",
    ]  # fmt: skip


def test_bad_arguments_are_refused_naming_them() -> None:
    done = subprocess.run(
        [sys.executable, "bench/harness_ab.py", "--baseline", "HEAD", "--repeats", "3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "--repeats" in done.stderr
