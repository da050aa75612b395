"""Metric reads at scale: chart data from 30M stored points, per database backend.

Run from the repository root: ``.venv/bin/python bench/metrics_read.py`` (``make bench``).

For SQLite (a fresh temp file) and PostgreSQL (``headway_bench_read``, recreated; skipped with a
note when unreachable) this migrates a fresh database and bulk-loads, with
``registry.metrics._bulk.bulk_load`` (not through REST):

- an experiment of ``--trials`` (100) trials x 3 metrics x ``--steps`` (100,000) steps (30M
  points), one report per step with the three metrics;
- one trial of 1,000,000 steps x 1 metric.

Then, in the same run and the same process (Django's test ``Client``, so the figures are server
time: view, queries, JSON rendering; no network), each timed as the median of ``--repeat``:

- ``overview``: ``GET experiments/{id}/metrics/?name=m0`` for each of the 3 metrics (every chart
  of the overview page), summed;
- ``series_1m``: ``GET trials/{id}/metrics/?name=loss`` of the 1M-point trial (2,000 points);
- ``zoom``: the same with ``x_min``/``x_max`` around 5% of it; ``zoom_10m``: the same 5% window
  shape on a trial of ``--zoom-steps`` (10,000,000) steps, where a window returns as many points
  but ten times as many are stored: ``zoom_10m_over_1m`` near 1 is the O(points returned) goal
  (9.4 ms at 1M and 62.5 ms at 10M before the bucket reads seeked the index);
- ``poll``: the same with ``after_step`` 100 steps before its end (a live update);
- ``naive_1m``: the baseline, every raw row of the 1M series read and downsampled in Python
  (``bench/_naive_downsample.py``, the in-Python min/max bucketing the store replaced).

It prints server ms, payload bytes and stored bytes per point (raw reports + series + buckets,
``pg_total_relation_size`` / SQLite ``dbstat``), and ends with one JSON line (timing keys end in
``_ms``). Targets (issue): series_1m <= 150 ms, overview <= 300 ms and <= 1 MB. Reference, not
measured here: MLflow stores 232 B per metric row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fixtures import (
    METRICS,
    STARTED_AT,
    load_metric_experiment,
    searcher_config,
    timed_get,
)
from _server import REPO, Backend, backend_factories
from _tiny import pick

POSTGRES_URL = os.environ.get(
    "HEADWAY_BENCH_READ_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/headway_bench_read"
)
LONG_STEPS = 1_000_000
TARGET_SERIES_MS, TARGET_OVERVIEW_MS, TARGET_OVERVIEW_BYTES = 150.0, 300.0, 1_000_000
TABLES = ("registry_metricreport", "registry_metricseries", "registry_metricbucket")


def _load(trials: int, steps: int, zoom_steps: int) -> tuple[int, int, int, int]:
    """(child) Bulk-load the experiment, the long trial and the zoom trial (``zoom_steps``
    steps); return their ids and the points stored."""
    import numpy as np
    from django.contrib.auth import get_user_model

    from registry.metrics._bulk import bulk_load
    from registry.models import Experiment, Trial

    owner = get_user_model().objects.get(username="bench")
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    experiment, _, points = load_metric_experiment(
        owner, name="read-bench", trials=trials, steps=steps, rng=rng
    )
    long_experiment = Experiment.objects.create(
        owner=owner, name="read-bench-long", config=searcher_config(steps), model_definition=b""
    )
    long_trial = Trial.objects.create(experiment=long_experiment, hparams={})
    long_steps = np.arange(1, LONG_STEPS + 1, dtype=np.int64)
    loss = np.exp(-long_steps / 2e5) + 0.05 * rng.standard_normal(LONG_STEPS)
    points += bulk_load(
        long_trial.id, "training", long_steps, {"loss": loss}, started_at=STARTED_AT
    )
    huge_trial = Trial.objects.create(experiment=long_experiment, hparams={})
    huge_steps = np.arange(1, zoom_steps + 1, dtype=np.int64)
    points += bulk_load(
        huge_trial.id,
        "training",
        huge_steps,
        {"loss": np.exp(-huge_steps / 2e6) + 0.05 * rng.standard_normal(zoom_steps)},
        started_at=STARTED_AT,
    )
    print(f"  loaded {points:,} points in {time.perf_counter() - t0:.0f} s", flush=True)
    return experiment.id, long_trial.id, huge_trial.id, points


def _stored_bytes() -> int:
    """(child) Bytes of the metric tables with their indexes."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            total = 0
            for table in TABLES:
                cursor.execute("SELECT pg_total_relation_size(%s)", [table])
                total += cursor.fetchone()[0]
            return total
        marks = ", ".join(["%s"] * len(TABLES))
        cursor.execute(
            "SELECT SUM(pgsize) FROM dbstat WHERE name IN"
            f" (SELECT name FROM sqlite_master WHERE tbl_name IN ({marks}))",
            list(TABLES),
        )
        return int(cursor.fetchone()[0] or 0)


def _timed(client, path: str, repeat: int) -> tuple[float, int, dict]:
    """Median ms of ``repeat`` GETs, the payload bytes and the decoded answer."""
    ms, response = timed_get(client, path, repeat)
    return ms, len(response.content), json.loads(response.content)


def _naive(trial_id: int, repeat: int) -> float:
    """(child) The pre-store read: every raw row of the series, downsampled in Python."""
    from _naive_downsample import downsample_minmax

    from headway.metric_values import chartable
    from registry.models import MetricReport

    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        steps, values = [], []
        rows = MetricReport.objects.filter(trial_id=trial_id, group="training").order_by(
            "steps_completed"
        )
        for step, metrics in rows.values_list("steps_completed", "metrics").iterator(2000):
            steps.append(step)
            values.append(chartable(metrics.get("loss")))
        out = downsample_minmax(steps, values, 2000)
        json.dumps({"steps": out[0], "values": out[1]})
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _zoom(client, trial_id: int, stored_steps: int, repeat: int) -> tuple[float, int]:
    """Median ms and bytes of a 5% window in the middle of a ``stored_steps`` series."""
    lo, hi = stored_steps // 2, stored_steps // 2 + stored_steps // 20
    path = f"/api/v1/trials/{trial_id}/metrics/?name=loss&x_min={lo}&x_max={hi}"
    ms, size, data = _timed(client, path, repeat)
    assert data["series"][0]["steps"][0] == lo and data["series"][0]["steps"][-1] == hi
    return ms, size


def _child(
    token: str, trials: int, steps: int, zoom_steps: int, repeat: int, out_path: str
) -> None:
    """(child) Load, measure, write the figures as JSON to ``out_path``."""
    import django

    django.setup()
    from django.test import Client

    experiment_id, long_id, huge_id, points = _load(trials, steps, zoom_steps)
    stored = _stored_bytes()
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    overview_ms, overview_bytes, series_count = 0.0, 0, 0
    for name in METRICS:
        ms, size, data = _timed(
            client, f"/api/v1/experiments/{experiment_id}/metrics/?name={name}", repeat
        )
        overview_ms += ms
        overview_bytes += size
        series_count += len(data["series"])
        assert all(len(s["steps"]) <= 100 for s in data["series"])
    trial_path = f"/api/v1/trials/{long_id}/metrics/?name=loss"
    series_ms, series_bytes, data = _timed(client, trial_path, repeat)
    (series,) = data["series"]
    assert series["count"] == LONG_STEPS and len(series["steps"]) <= 2000
    zoom_ms, zoom_bytes = _zoom(client, long_id, LONG_STEPS, repeat)
    zoom_10m_ms, _ = _zoom(client, huge_id, zoom_steps, repeat)
    poll_ms, poll_bytes, data = _timed(
        client, f"{trial_path}&after_step={LONG_STEPS - 100}", repeat
    )
    assert len(data["series"][0]["steps"]) == 100
    naive_ms = _naive(long_id, max(1, repeat // 2))
    figures = {
        "points_stored": points,
        "overview_series": series_count,
        "overview_ms": overview_ms,
        "overview_bytes": overview_bytes,
        "series_1m_ms": series_ms,
        "series_1m_bytes": series_bytes,
        "zoom_ms": zoom_ms,
        "zoom_bytes": zoom_bytes,
        "zoom_10m_ms": zoom_10m_ms,
        "zoom_10m_over_1m": zoom_10m_ms / zoom_ms,
        "poll_ms": poll_ms,
        "poll_bytes": poll_bytes,
        "naive_1m_ms": naive_ms,
        "naive_over_store": naive_ms / series_ms,
        "stored_bytes_per_point": stored / points,
    }
    Path(out_path).write_text(json.dumps(figures))


def measure(
    backend: Backend, trials: int, steps: int, zoom_steps: int, repeat: int
) -> dict[str, float]:
    token = backend.prepare()
    out = backend.var_dir / "figures.json"
    cmd = [sys.executable, __file__, "--child", token, "--trials", str(trials)]
    cmd += ["--steps", str(steps), "--zoom-steps", str(zoom_steps)]
    cmd += ["--repeat", str(repeat), "--out", str(out)]
    subprocess.run(cmd, cwd=REPO, env=backend.env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=pick(100, 2))
    parser.add_argument("--steps", type=int, default=pick(100_000, 500))
    parser.add_argument("--repeat", type=int, default=pick(5, 1))
    parser.add_argument("--zoom-steps", type=int, default=pick(10_000_000, 20_000))
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--child", metavar="TOKEN", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.trials, args.steps, args.zoom_steps, args.repeat, args.out)
    backends = backend_factories(POSTGRES_URL, postgres=not args.no_postgres)
    figures: dict[str, float] = {}
    rows = []
    for make in backends:
        backend = make()
        try:
            print(f"loading and measuring {backend.label} ...", flush=True)
            r = measure(backend, args.trials, args.steps, args.zoom_steps, args.repeat)
        finally:
            backend.cleanup()
        rows.append((backend.label, r))
        figures.update({f"{backend.label}_{k}": round(v, 3) for k, v in r.items()})
    print()
    head = f"{'backend':9s} {'overview ms':>11s} {'KB':>6s} {'1M ms':>7s} {'zoom ms':>8s}"
    head += f" {'zoom@10M':>8s} {'10M/1M':>6s}"
    head += f" {'poll ms':>8s} {'naive ms':>9s} {'naive/store':>11s} {'B/point':>8s}"
    print(head)
    print("-" * len(head))
    for label, r in rows:
        print(
            f"{label:9s} {r['overview_ms']:11.1f} {r['overview_bytes'] / 1000:6.0f}"
            f" {r['series_1m_ms']:7.1f} {r['zoom_ms']:8.1f} {r['zoom_10m_ms']:8.1f}"
            f" {r['zoom_10m_over_1m']:6.2f} {r['poll_ms']:8.1f}"
            f" {r['naive_1m_ms']:9.0f} {r['naive_over_store']:10.0f}x"
            f" {r['stored_bytes_per_point']:8.1f}"
        )
    print(
        f"targets: 1M series <= {TARGET_SERIES_MS:.0f} ms, overview <= {TARGET_OVERVIEW_MS:.0f} ms"
        f" and <= {TARGET_OVERVIEW_BYTES / 1e6:.0f} MB; reference: MLflow 232 B per metric row."
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
