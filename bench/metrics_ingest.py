"""Metric ingestion over REST: batched points/s and single-report latency, per database backend.

Run from the repository root: ``.venv/bin/python bench/metrics_ingest.py`` (``make bench``).

For SQLite (a fresh temp file) and PostgreSQL (``headway_bench``, recreated; skipped with a note
when the server is unreachable) this migrates a fresh database, makes a user token, starts the
web server as a subprocess (``manage.py runserver``, what the embedded setup runs; then ``serve``,
gunicorn with ``config/gunicorn.py`` as ``manage.py serve`` and the Docker image run it: gthread
workers keeping the client's connection alive; and runserver with TCP_NODELAY when the stock one
shows the 40 ms Nagle/delayed-ACK floor) and measures, from one keep-alive session configured as
the SDK's (``headway.client._session.http_session``), bodies encoded (compact JSON) before the clock
starts, as the SDK's reporter sends them:

- batched: 10 metrics x 10,000 steps = 100,000 points for one trial, 1,000 points per POST
  (100 reports of 10 metrics); points/s = points / summed wall time of the POSTs;
- single: p50/p90 round trip of one report of one metric (300 requests after 30 warm-up);
- baseline: the same server's ``GET /healthz`` p50, the floor every endpoint pays, so the table
  shows ``single_p50 / healthz_p50``;
- correctness: ``GET trials/{id}/metrics/?max_points=0&name=m0`` returns the 10,000 steps in order;
- server CPU: the server processes' CPU time (psutil) per single report and per batched point,
  which a busy machine inflates far less than wall time;
- SDK: steps/s delivered by the SDK's reporter from a training loop, beside the loop's own
  speed without reporting.

The same run first measures the baseline commit (``BASELINE_REF``, the last commit before the
fast path; ``HEADWAY_BENCH_BASELINE=<ref>`` picks another, ``none`` skips it; skipped in
tiny mode) in a temporary git worktree (``bench/_baseline.py``: the old code measured by this
script), and prints each figure's ratio to it.

Then (``--no-pairs`` skips it) both this tree and ``PAIRS_REF`` (the commit before the one-statement
report; ``HEADWAY_BENCH_PAIRS_BASELINE=<ref>``) run at once behind gunicorn as deployed, each on
its own database, and rounds of one-point reports and 1,000-point batches alternate between them
(``bench/_report_pairs.py``): the ratio of each round and its range, which the machine's load
moves far less than two halves measured one after the other. In tiny mode both sides are this
tree.

Targets: >= 200,000 points/s batched on SQLite and >= 100,000 on PostgreSQL,
<= 3 ms p50 single on both, >= 50,000 SDK steps/s. ``--profile`` runs the same POSTs
in-process through Django's test Client under cProfile and prints where the time goes, grouped
by package. The last line printed is a JSON object of the figures. Reference only (not measured
here): MLflow ~5,000 points/s batched and 15-60 ms per single ``log_metric`` on this machine
(quoted in the issue).
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

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _baseline import compare, run_baseline, wanted
from _report_pairs import measure_pairs
from _request_profile import print_by_package
from _server import (
    REPO,
    Backend,
    Server,
    backend_factories,
    gunicorn_available,
    single_file_model_definition,
)
from _tiny import pick, tiny
from sdk_reporting import bench_sdk  # its one-pair row; sdk_reporting.py has more

from headway.client._session import http_session

POSTGRES_URL = os.environ.get(
    "HEADWAY_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/headway_bench"
)
METRICS, STEPS, REPORTS_PER_POST = 10, pick(10_000, 1_000), 100
SINGLE_N, WARMUP_N = pick(300, 30), pick(30, 5)
TARGET_POINTS_PER_S = {"sqlite": 200_000, "postgres": 100_000}
TARGET_SINGLE_P50_MS, TARGET_SDK_STEPS_PER_S = 3.0, 50_000
# The last commit before the fast path (token cache, fewer statements per report).
BASELINE_REF = "a3fb5fb^"
# The commit before the one-statement report on PostgreSQL (the interleaved pairs' baseline).
PAIRS_REF = "6a8a8e4^"
# The figures compared with the baseline's (per backend prefix).
COMPARED = (
    "batched_points_per_s",
    "batched_server_cpu_us_per_point",
    "single_p50_ms",
    "single_server_cpu_ms",
    "sdk_steps_per_s",
)
# A keep-alive GET /healthz above this is the 40 ms delayed-ACK stall, not the server's work.
NAGLE_FLOOR_MS = 20.0
CONFIG = """\
name: metrics-ingest-bench
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
"""


def _model_definition() -> str:
    """A no-op ``train.py`` (nothing runs it during the bench)."""
    return single_file_model_definition("train.py", "print('bench')\n")


def create_trial(session: requests.Session, url: str) -> int:
    """Create a single-trial experiment over REST and return its trial id."""
    body = {"config": CONFIG, "model_definition": _model_definition()}
    resp = session.post(f"{url}/api/v1/experiments/", json=body, timeout=30)
    resp.raise_for_status()
    trials = session.get(f"{url}/api/v1/experiments/{resp.json()['id']}/trials/", timeout=30)
    trials.raise_for_status()
    data = trials.json()
    return (data["results"] if isinstance(data, dict) else data)[0]["id"]


def batch_bodies(first_step: int = 1) -> list[dict]:
    """The 100 POST bodies of the batched run: 100 reports x 10 metrics each."""
    bodies = []
    for start in range(first_step, first_step + STEPS, REPORTS_PER_POST):
        reports = [
            {
                "group": "training",
                "steps_completed": step,
                "metrics": {f"m{i}": 1.0 / (step + i) for i in range(METRICS)},
            }
            for step in range(start, start + REPORTS_PER_POST)
        ]
        bodies.append({"reports": reports})
    return bodies


def single_body(step: int) -> dict:
    """One report of one metric (what an unbatched logger sends)."""
    return {"reports": [{"group": "training", "steps_completed": step, "metrics": {"loss": 0.5}}]}


def _percentile_ms(samples: list[float], q: int) -> float:
    """The q-th percentile (1..99) of durations in seconds, in milliseconds."""
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] * 1000


# 503 answers retried by _post (the database busy or out of connections on a shared machine).
RETRIED_503 = [0]


def _post(session: requests.Session, url: str, body: dict) -> float:
    """POST a metrics body; return its round trip in seconds (raises on a non-200 answer).

    A 503 (the server's "database busy or unavailable, retry") is sent again after its
    ``Retry-After`` (at most 5 times, as the SDK would), counted in ``RETRIED_503``; the time
    returned is the successful attempt's.
    """
    # Encoded before the clock starts, compact, as the SDK's reporter sends its batches.
    data = json.dumps(body, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json"}
    for attempt in range(6):
        t0 = time.perf_counter()
        resp = session.post(url, data=data, headers=headers, timeout=60)
        elapsed = time.perf_counter() - t0
        if resp.status_code != 503 or attempt == 5:
            break
        RETRIED_503[0] += 1
        time.sleep(float(resp.headers.get("Retry-After", "1")))
    if resp.status_code != 200:
        raise RuntimeError(f"POST {url} -> {resp.status_code}: {resp.text[:500]}")
    return elapsed


def bench_batched(server: Server, session: requests.Session, trial_id: int) -> dict[str, float]:
    """Post 100,000 points in 1,000-point batches; points/s over the summed POST time."""
    endpoint = f"{server.url}/api/v1/trials/{trial_id}/metrics/"
    cpu0 = server.cpu_seconds()
    times = [_post(session, endpoint, body) for body in batch_bodies()]
    return {
        "batched_points_per_s": METRICS * STEPS / sum(times),
        "batched_post_p50_ms": _percentile_ms(times, 50),
        "batched_wall_s": sum(times),
        "batched_server_cpu_us_per_point": (server.cpu_seconds() - cpu0) * 1e6 / (METRICS * STEPS),
    }


def bench_single(server: Server, session: requests.Session, trial_id: int) -> dict[str, float]:
    """p50/p90 round trip of a one-metric report, after warm-up, on its own trial."""
    endpoint = f"{server.url}/api/v1/trials/{trial_id}/metrics/"
    for step in range(1, WARMUP_N + 1):
        _post(session, endpoint, single_body(step))
    cpu0 = server.cpu_seconds()
    times = [_post(session, endpoint, single_body(WARMUP_N + i)) for i in range(1, SINGLE_N + 1)]
    return {
        "single_p50_ms": _percentile_ms(times, 50),
        "single_p90_ms": _percentile_ms(times, 90),
        "single_server_cpu_ms": (server.cpu_seconds() - cpu0) * 1000 / SINGLE_N,
    }


def bench_healthz(session: requests.Session, url: str) -> float:
    """p50 of ``GET /healthz`` in ms: the server's floor (no auth, no database)."""
    times = []
    for i in range(WARMUP_N + SINGLE_N):
        t0 = time.perf_counter()
        session.get(f"{url}/healthz", timeout=30).raise_for_status()
        if i >= WARMUP_N:
            times.append(time.perf_counter() - t0)
    return _percentile_ms(times, 50)


def verify(session: requests.Session, url: str, trial_id: int) -> bool:
    """Whether the batched trial's m0 series reads back as 10,000 points in step order."""
    params: dict[str, str | int] = {"max_points": 0, "name": "m0"}
    resp = session.get(f"{url}/api/v1/trials/{trial_id}/metrics/", params=params, timeout=60)
    resp.raise_for_status()
    series = resp.json()["series"]
    return (
        len(series) == 1
        and series[0]["count"] == STEPS
        and series[0]["steps"] == list(range(1, STEPS + 1))
        and series[0]["values"][0] == 1.0
    )


def measure(backend: Backend, token: str, kind: str) -> dict[str, float | bool]:
    """All figures for one backend behind one server kind."""
    # The SDK's own HTTP session (its token auth, the environment read once).
    with Server(backend, kind) as server, http_session(token) as session:
        batched_trial = create_trial(session, server.url)
        single_trial = create_trial(session, server.url)
        out: dict[str, float | bool] = {"healthz_p50_ms": bench_healthz(session, server.url)}
        out.update(bench_batched(server, session, batched_trial))
        out.update(bench_single(server, session, single_trial))
        out.update(bench_sdk(server.url, token, create_trial(session, server.url)))
        out["single_over_healthz"] = out["single_p50_ms"] / out["healthz_p50_ms"]
        out["verified"] = verify(session, server.url, batched_trial)
    return out


def run_profile(backend: Backend, token: str) -> None:
    """Profile the request path in a child process bound to ``backend``'s database."""
    cmd = [sys.executable, __file__, "--profile-child", token]
    subprocess.run(cmd, cwd=REPO, env=backend.env, check=True)


def _profile_child(token: str) -> None:
    """(child) Batched and single POSTs through Django's test Client under cProfile."""
    import cProfile
    import pstats

    import django

    django.setup()
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Token {token}")

    def post(path: str, body: dict) -> None:
        resp = client.post(path, json.dumps(body), content_type="application/json")
        assert resp.status_code in (200, 201), resp.content[:300]

    trials = []
    for _ in range(2):
        body = {"config": CONFIG, "model_definition": _model_definition()}
        exp = client.post("/api/v1/experiments/", body, content_type="application/json").json()
        trial = client.get(f"/api/v1/experiments/{exp['id']}/trials/").json()
        trials.append((trial["results"] if isinstance(trial, dict) else trial)[0]["id"])
    for name, trial_id, bodies in (
        ("batched (100 POSTs x 1,000 points)", trials[0], batch_bodies()),
        ("single (300 POSTs x 1 point)", trials[1], [single_body(s) for s in range(1, 301)]),
    ):
        path = f"/api/v1/trials/{trial_id}/metrics/"
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        for body in bodies:
            post(path, body)
        prof.disable()
        wall = time.perf_counter() - t0
        print(f"\n--- in-process profile: {name}: {wall * 1000 / len(bodies):.2f} ms/POST ---")
        stats = pstats.Stats(prof)
        print_by_package(stats, len(bodies))
        stats.sort_stats("cumulative").print_stats(r"registry|rest_framework/(views|request)", 12)
        stats.sort_stats("tottime").print_stats(15)


def _round(value: float | bool) -> float | bool:
    return value if isinstance(value, bool) else round(value, 3)


def _fmt(value: float | bool | None, spec: str) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, bool) else format(value, spec)


def print_table(results: dict[str, dict[str, float | bool]]) -> None:
    """A readable table: one row per backend/server."""
    head = (
        f"{'backend/server':26s} {'points/s':>10s} {'POST ms':>8s} {'us/pt cpu':>9s} "
        f"{'single p50':>10s} {'p90':>7s} {'ms cpu':>6s} {'healthz':>8s} {'ratio':>6s} "
        f"{'SDK steps/s':>11s} {'loop alone':>10s}  verified"
    )
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        print(
            f"{name:26s} {_fmt(r.get('batched_points_per_s'), ',.0f'):>10s} "
            f"{_fmt(r.get('batched_post_p50_ms'), '.1f'):>8s} "
            f"{_fmt(r.get('batched_server_cpu_us_per_point'), '.2f'):>9s} "
            f"{_fmt(r.get('single_p50_ms'), '.2f'):>10s} {_fmt(r.get('single_p90_ms'), '.2f'):>7s} "
            f"{_fmt(r.get('single_server_cpu_ms'), '.2f'):>6s} "
            f"{_fmt(r.get('healthz_p50_ms'), '.2f'):>8s} "
            f"{_fmt(r.get('single_over_healthz'), '.1f'):>6s} "
            f"{_fmt(r.get('sdk_steps_per_s'), ',.0f'):>11s} "
            f"{_fmt(r.get('sdk_baseline_loop_steps_per_s'), ',.0f'):>10s}  "
            f"{_fmt(r.get('verified'), '')}"
        )
    print(
        f"targets: >= {TARGET_POINTS_PER_S['sqlite']:,} (SQLite) / "
        f"{TARGET_POINTS_PER_S['postgres']:,} (PostgreSQL) points/s batched, <= "
        f"{TARGET_SINGLE_P50_MS} ms p50 single, >= {TARGET_SDK_STEPS_PER_S:,} SDK steps/s.\nreference (quoted in the issue, not measured here): MLflow ~5,000 points/s "
        "batched, 15-60 ms per single log_metric."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="always profile the request path")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline commit")
    parser.add_argument("--no-pairs", action="store_true", help="skip the interleaved pairs")
    parser.add_argument(
        "--pairs-only", action="store_true", help="only the interleaved pairs (no full run)"
    )
    parser.add_argument("--profile-child", metavar="TOKEN", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile_child:
        return _profile_child(args.profile_child)

    # The deployed server (gthread, keep-alive), not gunicorn's sync workers: those close the
    # connection after every request, so each report would also pay a TCP handshake.
    kinds = ["runserver"] + (["serve"] if gunicorn_available() else [])
    if "serve" not in kinds:
        print("note: gunicorn cannot be imported here; measuring runserver only.")
    skip_baseline = args.no_baseline or args.pairs_only or tiny()
    baseline_ref = None if skip_baseline else wanted(BASELINE_REF)
    baseline: dict[str, float | bool] = {}
    if baseline_ref is not None:
        baseline = run_baseline(
            baseline_ref,
            Path(__file__).name,
            ["--no-pairs", *(["--no-postgres"] if args.no_postgres else [])],
        )
    backends = (
        [] if args.pairs_only else backend_factories(POSTGRES_URL, postgres=not args.no_postgres)
    )

    results: dict[str, dict[str, float | bool]] = {}
    figures: dict[str, float | bool] = {}
    for make in backends:
        backend = make()
        try:
            token = backend.prepare()
            todo = list(kinds)
            while todo:
                kind = todo.pop(0)
                print(f"measuring {backend.label} behind {kind} ...", flush=True)
                r = measure(backend, token, kind)
                results[f"{backend.label}/{kind}"] = r
                prefix = backend.label if kind == "runserver" else f"{backend.label}_{kind}"
                figures.update({f"{prefix}_{k}": _round(v) for k, v in r.items()})
                if kind == "runserver" and r["healthz_p50_ms"] > NAGLE_FLOOR_MS:
                    print(
                        f"note: healthz p50 {r['healthz_p50_ms']:.1f} ms is the Nagle/delayed-ACK "
                        "floor (runserver without TCP_NODELAY); also measuring runserver_nodelay."
                    )
                    todo.insert(0, "runserver_nodelay")
            embedded = results[f"{backend.label}/runserver"]
            met = (
                embedded["batched_points_per_s"] >= TARGET_POINTS_PER_S[backend.label]
                and embedded["single_p50_ms"] <= TARGET_SINGLE_P50_MS
                and embedded["sdk_steps_per_s"] >= TARGET_SDK_STEPS_PER_S
            )
            figures[f"{backend.label}_targets_met"] = met
            if not met and not args.profile:
                print(f"{backend.label}: a target is missed; --profile shows where time goes.")
            if args.profile:
                print(f"\nprofiling the request path on {backend.label} ...", flush=True)
                run_profile(backend, token)
        finally:
            backend.cleanup()

    if not args.no_pairs:
        only = os.environ.get("HEADWAY_BENCH_BACKENDS", "")
        labels = [b for b in ("sqlite", "postgres") if only in ("", b)]
        if args.no_postgres:
            labels = [b for b in labels if b != "postgres"]
        ref = None if tiny() else os.environ.get("HEADWAY_BENCH_PAIRS_BASELINE", PAIRS_REF)
        figures.update(measure_pairs(ref, labels, POSTGRES_URL))

    figures["retried_503"] = RETRIED_503[0]
    print()
    print_table(results)
    if baseline:
        keys = [f"{label}_{name}" for label in ("sqlite", "postgres") for name in COMPARED]
        figures.update(compare(figures, baseline, str(baseline_ref), keys))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
