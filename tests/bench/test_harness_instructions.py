"""bench/harness_instructions.py's arithmetic: per-batch slopes from callgrind's dumps.

The benchmark itself needs valgrind and 10-15 minutes, so the suite checks only how it turns
the four dumps' totals into figures (fit()'s one-off cost must cancel out).
"""

from __future__ import annotations

import pathlib
import sys

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "bench"))
import harness_instructions


def test_slopes_leave_the_one_off_cost_out(tmp_path: pathlib.Path) -> None:
    raw, harness, fixed = 2_000_000, 2_040_000, 30_000_000
    totals = {2: raw * 200, 3: harness * 200 + fixed, 4: raw * 700, 5: harness * 700 + fixed}
    for part, total in totals.items():
        (tmp_path / f"cg.out.{part}").write_text(f"events: Ir\nsummary: {total}\ntotals: {total}\n")
    assert harness_instructions.figures(tmp_path, (200, 700)) == {
        "raw_instructions_per_batch": raw,
        "harness_instructions_per_batch": harness,
        "over_raw_per_batch": 40_000,
        "ratio": round(raw / harness, 4),
    }
