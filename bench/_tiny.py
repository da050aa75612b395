"""Tiny mode: every benchmark runs in seconds, to prove it still works (tests/bench/test_bench_tiny.py).

``HEADWAY_BENCH_TINY=1`` (or ``bench/run_all.py --tiny``) makes each benchmark shrink its sizes,
rounds and repeats to the least that still walks every code path and prints its JSON line with
all of its keys. Tiny numbers are meaningless as measurements: only the shape is checked.
"""

from __future__ import annotations

import os

ENV = "HEADWAY_BENCH_TINY"


def tiny() -> bool:
    """Whether this benchmark runs in tiny mode (``HEADWAY_BENCH_TINY=1``)."""
    return os.environ.get(ENV, "") not in ("", "0")


def pick(full: int, small: int) -> int:
    """``small`` in tiny mode, else ``full``: the default of a size, count or repeat."""
    return small if tiny() else full
