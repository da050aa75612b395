"""Run every benchmark to its JSON line, on the embedded default and on PostgreSQL + Redis (``make bench``).

Run from the repository root: ``.venv/bin/python bench/run_all.py [--tiny] [--only NAME,...]
[--backends sqlite,postgres]``.

Two passes, each running every benchmark of ``BENCHMARKS`` as a subprocess:

- ``sqlite``: the embedded default (SQLite file, filesystem broker); ``DATABASE_URL`` and
  ``REDIS_URL`` are removed from the benchmark's environment.
- ``postgres``: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/headway_bench`` and
  ``REDIS_URL=redis://127.0.0.1:6379/15`` unless already set (each benchmark makes and drops
  databases of its own next to that name). Skipped with a note when the server is unreachable.

S3 is moto's server, which ``checkpoint_io`` starts itself in both passes. Every benchmark runs
in a process group of its own, which is killed after it exits (nothing it started outlives it);
PostgreSQL databases named ``headway_bench*`` that a benchmark left behind are dropped after
each pass. ``--tiny`` sets ``HEADWAY_BENCH_TINY=1`` (bench/_tiny.py). Exit status 1 when any
benchmark failed or its last line is not a JSON object; the last line printed is one JSON object
``{pass: {benchmark: its figures or {"error": ...}}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import REPO, _admin_url
from _tiny import ENV as TINY_ENV

# Every benchmark, in the order ``make bench`` runs them.
BENCHMARKS = (
    "harness_overhead",
    "metrics_ingest",
    "sdk_reporting",
    "logging_overhead",
    "tensorboard_writer",
    "metrics_read",
    "hparam_importance",
    "run_filter",
    "dashboard",
    "dashboard_scale",
    "preempt_latency",
    "scheduling",
    "scheduling_scale",
    "ddp_overhead",
    "serving",
    "overload",
    "checkpoint_io",
)
POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/headway_bench"
REDIS_URL = "redis://127.0.0.1:6379/15"
# A benchmark that runs longer than this is stopped (a hung one must not hang `make bench`).
TIMEOUT_S = 3 * 3600


def last_json(output: str) -> dict[str, Any] | None:
    """The JSON object on the last non-empty line of ``output``, or None."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        found = json.loads(lines[-1])
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def pass_env(backend: str, tiny: bool) -> dict[str, str]:
    """The environment of every benchmark of one pass."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["HEADWAY_BENCH_BACKENDS"] = backend
    if backend == "postgres":
        env["DATABASE_URL"] = os.environ.get("DATABASE_URL") or POSTGRES_URL
        env["REDIS_URL"] = os.environ.get("REDIS_URL") or REDIS_URL
        env.setdefault("HEADWAY_BENCH_POSTGRES_URL", env["DATABASE_URL"])
        env.setdefault("HEADWAY_BENCH_READ_POSTGRES_URL", env["DATABASE_URL"] + "_read")
        env.setdefault("HEADWAY_BENCH_DASH_POSTGRES_URL", env["DATABASE_URL"] + "_dash")
    if tiny:
        env[TINY_ENV] = "1"
    return env


def postgres_databases(database_url: str) -> set[str] | str:
    """The names of the server's ``headway_bench*`` databases, or why it cannot be reached."""
    import psycopg

    admin, _ = _admin_url(database_url)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            rows = conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'headway_bench%'"
            ).fetchall()
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return {name for (name,) in rows}


def drop_databases(database_url: str, names: set[str]) -> None:
    """Drop ``names`` (databases a benchmark left behind), saying so."""
    import psycopg

    admin, _ = _admin_url(database_url)
    with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
        for name in sorted(names):
            print(f"note: dropping database {name} left behind", file=sys.stderr)
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_one(name: str, env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    """Run ``bench/NAME.py``, echoing its output; its JSON figures or ``{"error": ...}``."""
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / f"{name}.py")],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: whatever it leaves is killed below
    )
    output = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"  [{name}] {line}", end="", flush=True)
            output.append(line)
            if time.monotonic() - began > timeout_s:
                raise TimeoutError
        proc.wait()
    except TimeoutError:
        output.append(f"timed out after {timeout_s:.0f} s\n")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    figures = last_json("".join(output))
    if proc.returncode != 0 or figures is None:
        tail = "".join(output)[-500:].strip()
        return {"error": f"exit status {proc.returncode}; last output: {tail}"}
    figures["wall_s"] = round(time.monotonic() - began, 1)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="every benchmark in tiny mode")
    parser.add_argument("--only", help=f"comma-separated, of {', '.join(BENCHMARKS)}")
    parser.add_argument("--backends", default="sqlite,postgres", help="passes to run")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="per benchmark, s")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    passes = args.backends.split(",")
    if unknown or not set(passes) <= {"sqlite", "postgres"}:
        parser.error(f"unknown benchmark {unknown} or backend in {passes}")
    results: dict[str, dict[str, Any]] = {}
    for backend in passes:
        env = pass_env(backend, args.tiny)
        before: set[str] | str = set()
        if backend == "postgres":
            before = postgres_databases(env["DATABASE_URL"])
            if isinstance(before, str):
                print(f"note: skipping the PostgreSQL pass ({before})")
                results[backend] = {"skipped": before}
                continue
        results[backend] = {}
        for name in names:
            print(f"== {name} ({backend}{', tiny' if args.tiny else ''})", flush=True)
            results[backend][name] = run_one(name, env, args.timeout)
        if backend == "postgres":
            after = postgres_databases(env["DATABASE_URL"])
            if isinstance(after, set) and isinstance(before, set) and after - before:
                drop_databases(env["DATABASE_URL"], after - before)
    failed = [
        f"{backend}/{name}"
        for backend, rows in results.items()
        for name, row in rows.items()
        if isinstance(row, dict) and "error" in row
    ]
    print(f"failed: {', '.join(failed)}" if failed else "every benchmark printed its JSON line")
    print(json.dumps(results))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
