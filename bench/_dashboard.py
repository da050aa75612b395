"""Dashboard pages at scale: server time of the list, overview and trial pages, per backend.

Run from the repository root: ``.venv/bin/python bench/dashboard.py`` (``make bench``); a quick
run: ``--steps 2000 --experiments 500``. ``bench/dashboard.py`` is only the entry point: a module
named ``dashboard`` shadows the Django app on ``sys.path`` and clashes with it in mypy.

For SQLite (a fresh temp file) and PostgreSQL (``headway_bench_dash``, recreated; skipped with a
note when unreachable) this migrates a fresh database and fills it:

- ``--experiments`` (10,000) experiments in the list in all, ``bulk_create``d
  (``_fixtures.fill_experiment_list``: 20 owners, labels, a mix of states, 1 in 40 with a few
  trials);
- the metric-store issue's experiment, newest: ``--trials`` (100) trials x 3 metrics x
  ``--steps`` (100,000) steps, bulk-loaded as ``bench/metrics_read.py`` does
  (``_fixtures.load_metric_experiment``); its trials are then marked COMPLETED with one
  exited run and 10 checkpoints each.

Then, in the same process (Django's test ``Client`` with ``force_login``, so the figures are
server time: view, queries, template or JSON rendering; no network), each the median of
``--repeat`` GETs:

- ``list``: ``/`` (first page), and with filters (``state``, ``label``, ``owner``, ``name``),
  sorts (``-best``, ``-trials``, ``name``) and page 100;
- ``overview_page``: ``/experiments/{id}/`` of the 100-trial experiment (HTML only);
- ``overview_data``: the chart data that page fetches (one request, built as
  ``static/js/charts.js`` builds it), ``/api/v1/experiments/{id}/metrics/?name=m0&name=m1&
  name=m2&max_points=P`` with ``P = max(50, min(2000, 30000 // (trials x metrics)))`` (100
  here); ``overview_total`` = page + data;
- ``trial``: ``/trials/{id}/`` of one of the 100 trials (HTML only); for information, the chart
  data it fetches (``trial_data``: ``/api/v1/trials/{id}/metrics/?name=m0&name=m1&name=m2&
  max_points=2000``) and ``trial_total`` = page + data (the target is on the page).

Each page is fetched once more with a ``connection.execute_wrapper`` counting its queries and
timing each ``execute`` (on PostgreSQL that includes the rows' transfer; SQLite steps through
rows while they are fetched, so its ``sql ms`` is a lower bound). ``--profile PAGE`` prints a
cProfile of that page after the measurements. It prints a table with the ratio to each target (list <= 150 ms, overview total <= 300 ms,
trial <= 150 ms) and ends with one JSON line (timing keys end in ``_ms``).

Then the overview drawn in real Chromium (``bench/_dashboard_browser.py``: 100 trials x 5
metrics x 10,000 steps and 1,000 trials x 3 metrics, navigation start to every visible chart
drawn, per trace mode, with the chart data's server time and JSON sizes); ``--no-browser`` skips
it, ``--no-pages`` runs only it. Its figures join the JSON line (keys ``browser_...``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import _dashboard_browser
from _fixtures import (
    METRICS,
    STARTED_AT,
    fill_experiment_list,
    load_metric_experiment,
    timed_get,
)
from _server import REPO, Backend, backend_factories
from _tiny import pick

# The child runs through the entry point, which puts the repository before bench/ on sys.path.
ENTRY_POINT = str(Path(__file__).with_name("dashboard.py"))

POSTGRES_URL = os.environ.get(
    "HEADWAY_BENCH_DASH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/headway_bench_dash"
)
TARGETS_MS = {"list": 150.0, "overview_total": 300.0, "trial": 150.0}
LIST_QUERIES = {
    "list": "",
    "list_state": "?state=COMPLETED",
    "list_label": "?label=baseline",
    "list_owner": "?owner=user07",
    "list_name": "?name=sweep",
    "list_archived": "?archived=on",
    "list_sort_best": "?sort=-best",
    "list_sort_trials": "?sort=-trials",
    "list_sort_name": "?sort=name",
    "list_page100": "?page=100",
}
CHECKPOINTS_PER_TRIAL = 10


def chart_max_points(trials: int, metrics: int) -> int:
    """Points per series the overview page asks for: 30,000 in all, 50 to 2,000 per series."""
    return max(50, min(2000, 30000 // max(1, trials * metrics)))


def _finish_trials(trial_ids: list[int], steps: int, per_trial: int) -> None:
    """(child) Make the loaded trials look run: COMPLETED, one exited run, checkpoints."""
    import uuid
    from datetime import timedelta

    from registry.models import Checkpoint, Experiment, Trial, TrialRun

    ended = STARTED_AT + timedelta(seconds=steps * 0.01)
    checkpoints, runs = [], []
    for n, trial_id in enumerate(trial_ids):
        for k in range(1, per_trial + 1):
            checkpoints.append(
                Checkpoint(
                    uuid=uuid.UUID(int=n * 1000 + k),
                    trial_id=trial_id,
                    run_id=1,
                    steps_completed=steps * k // per_trial,
                    resources={"state_dict.pth": 4_000_000, "metadata.json": 120},
                    size=4_000_120,
                )
            )
        runs.append(
            TrialRun(
                trial_id=trial_id,
                run_id=1,
                state="EXITED",
                worker="bench-host",
                exit_code=0,
                started_at=STARTED_AT,
                ended_at=ended,
            )
        )
    Checkpoint.objects.bulk_create(checkpoints, batch_size=500)
    TrialRun.objects.bulk_create(runs, batch_size=500)
    for n, trial_id in enumerate(trial_ids):
        Trial.objects.filter(id=trial_id).update(
            state="COMPLETED",
            run_id=1,
            steps_completed=steps,
            progress=1.0,
            best_validation=0.01 * (n % 17),
            latest_checkpoint=uuid.UUID(int=n * 1000 + per_trial),
            searcher_completed_length=steps,
            ended_at=ended,
        )
    Experiment.objects.filter(trials__id=trial_ids[0]).update(
        state="COMPLETED", progress=1.0, best_validation=0.0, ended_at=ended
    )


def _measure_page(client, path: str, repeat: int) -> dict[str, float]:
    """(child) ``{"ms", "bytes", "queries", "sql_ms"}`` of one page.

    ``ms`` is the median of ``repeat`` GETs; the queries and their time (the database's answer
    included, measured around each ``execute``) come from one more GET.
    """
    from django.db import connection

    ms, response = timed_get(client, path, repeat)
    sql_times: list[float] = []

    def timed_execute(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            sql_times.append((time.perf_counter() - t0) * 1000)

    with connection.execute_wrapper(timed_execute):
        client.get(path)
    return {
        "ms": ms,
        "bytes": len(response.content),
        "queries": len(sql_times),
        "sql_ms": sum(sql_times),
    }


def _profile(client, key: str, path: str, repeat: int) -> None:
    """(child) Print the top of a cProfile of ``repeat`` GETs of ``path`` (cumulative time)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        client.get(path)
    profiler.disable()
    print(f"\n--- profile of {key} ({path}), {repeat} GETs ---")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


def _child(args: argparse.Namespace) -> None:
    """(child) Fill the database, measure every page, write the figures as JSON to ``out_path``."""
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.test import Client

    trials, steps, experiments, repeat = args.trials, args.steps, args.experiments, args.repeat
    t0 = time.perf_counter()
    filler_trials = fill_experiment_list(max(0, experiments - 1))
    print(
        f"  {experiments - 1:,} list experiments ({filler_trials} trials)"
        f" in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    user = get_user_model().objects.get(username="bench")
    experiment, trial_ids, points = load_metric_experiment(
        user, name="dash-bench", trials=trials, steps=steps, rng=np.random.default_rng(0)
    )
    _finish_trials(trial_ids, steps, args.checkpoints_per_trial)
    print(f"  loaded {points:,} points in {time.perf_counter() - t0:.0f} s", flush=True)

    client = Client()
    client.force_login(user)
    max_points = chart_max_points(trials, len(METRICS))
    # As static/js/charts.js builds it (Board.baseParams): every selected name, then max_points.
    names = "".join(f"name={name}&" for name in METRICS)
    trial_id = trial_ids[len(trial_ids) // 2]
    paths = {key: f"/{query}" for key, query in LIST_QUERIES.items()}
    paths["overview_page"] = f"/experiments/{experiment.id}/"
    paths["overview_data"] = (
        f"/api/v1/experiments/{experiment.id}/metrics/?{names}max_points={max_points}&band=true"
    )
    paths["trial"] = f"/trials/{trial_id}/"
    trial_points = chart_max_points(1, len(METRICS))
    paths["trial_data"] = f"/api/v1/trials/{trial_id}/metrics/?{names}max_points={trial_points}"
    series = json.loads(client.get(paths["overview_data"]).content)["series"]
    assert len(series) == trials * len(METRICS), len(series)
    assert all(len(s["steps"]) <= max_points for s in series)
    pages = {key: _measure_page(client, path, repeat) for key, path in paths.items()}
    for key in args.profile:
        _profile(client, key, paths[key], repeat)
    figures: dict[str, float] = {"points_stored": points, "overview_max_points": max_points}
    for key, page in pages.items():
        figures[f"{key}_ms"] = page["ms"]
        figures[f"{key}_sql_ms"] = page["sql_ms"]
        figures[f"{key}_queries"] = page["queries"]
        figures[f"{key}_bytes"] = page["bytes"]
    figures["overview_total_ms"] = pages["overview_page"]["ms"] + pages["overview_data"]["ms"]
    figures["trial_total_ms"] = pages["trial"]["ms"] + pages["trial_data"]["ms"]
    Path(args.out).write_text(json.dumps(figures))


def measure(backend: Backend, args: argparse.Namespace) -> dict[str, float]:
    """Migrate ``backend``, create the ``bench`` user, run the child; return its figures."""
    backend.prepare()
    out = backend.var_dir / "figures.json"
    cmd = [sys.executable, ENTRY_POINT, "--child", "--trials", str(args.trials)]
    cmd += ["--steps", str(args.steps), "--experiments", str(args.experiments)]
    cmd += ["--repeat", str(args.repeat), "--out", str(out)]
    cmd += ["--checkpoints-per-trial", str(args.checkpoints_per_trial)]
    cmd += [f"--profile={key}" for key in args.profile]
    subprocess.run(cmd, cwd=REPO, env=backend.env, check=True)
    return json.loads(out.read_text())


def _target(key: str) -> float | None:
    if key.startswith("list"):
        return TARGETS_MS["list"]
    return TARGETS_MS.get(key)


def _print_table(label: str, r: dict[str, float]) -> None:
    head = f"{label:9s} {'page':17s} {'ms':>8s} {'target':>7s} {'ratio':>6s}"
    head += f" {'queries':>7s} {'sql ms':>7s} {'KB':>7s}"
    print(head)
    print("-" * len(head))
    keys = [*LIST_QUERIES, "overview_page", "overview_data", "overview_total"]
    for key in [*keys, "trial", "trial_data", "trial_total"]:
        target = _target(key)
        ms = r[f"{key}_ms"]
        line = f"{'':9s} {key:17s} {ms:8.1f}"
        line += f" {target:7.0f} {ms / target:6.2f}" if target else f" {'':7s} {'':6s}"
        if not key.endswith("_total"):
            line += f" {r[f'{key}_queries']:7.0f} {r[f'{key}_sql_ms']:7.1f}"
            line += f" {r[f'{key}_bytes'] / 1000:7.1f}"
        print(line)
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=pick(100, 2))
    parser.add_argument("--steps", type=int, default=pick(100_000, 200))
    parser.add_argument(
        "--experiments", type=int, default=pick(10_000, 50), help="in the list, in all"
    )
    parser.add_argument("--repeat", type=int, default=pick(5, 1))
    parser.add_argument(
        "--checkpoints-per-trial", type=int, default=CHECKPOINTS_PER_TRIAL, help="1 to 999"
    )
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        choices=[*LIST_QUERIES, "overview_page", "overview_data", "trial", "trial_data"],
        help="print a cProfile of this page (repeatable)",
    )
    parser.add_argument("--no-pages", action="store_true", help="only the Chromium part")
    _dashboard_browser.add_arguments(parser)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trials < 2 or args.steps < 10 or args.experiments < 1 or args.repeat < 1:
        parser.error("--trials >= 2, --steps >= 10, --experiments >= 1, --repeat >= 1")
    if not 1 <= args.checkpoints_per_trial <= 999:  # their uuids are n * 1000 + k
        parser.error("--checkpoints-per-trial must be 1 to 999")
    if args.child:
        return _child(args)
    if args.browser_child:
        return _dashboard_browser.child(args)
    backends = backend_factories(POSTGRES_URL, postgres=not args.no_postgres)
    if args.no_pages:
        backends = []
    figures: dict[str, float] = {}
    rows = []
    for make in backends:
        backend = make()
        try:
            print(f"loading and measuring {backend.label} ...", flush=True)
            r = measure(backend, args)
        finally:
            backend.cleanup()
        rows.append((backend.label, r))
        figures.update({f"{backend.label}_{k}": round(v, 3) for k, v in r.items()})
    print()
    for label, r in rows:
        _print_table(label, r)
    if rows:
        print(
            f"{args.experiments:,} experiments listed; overview: {args.trials} trials x"
            f" {len(METRICS)} metrics x {args.steps:,} steps. Targets: list <= 150 ms, overview"
            " page + chart data <= 300 ms, trial <= 150 ms (ratio = ms / target).\n"
        )
    missing = None if args.no_browser else _dashboard_browser.available()
    if missing:
        print(f"note: the Chromium part is skipped: {missing}", file=sys.stderr)
    if not args.no_browser and not missing:
        browser = _dashboard_browser.measure(args, ENTRY_POINT)
        _dashboard_browser.print_table(browser, args)
        figures.update({k: round(v, 3) for k, v in browser.items()})
    print(json.dumps(figures))
