"""Overload as back-pressure: 200 trials report while 50 dashboard readers poll, on PostgreSQL
with its default ``max_connections`` (``make bench``; docs/performance.md, "Overload").

Run from the repository root: ``.venv/bin/python bench/overload.py [--seconds S]``.

The server is the real one (gunicorn with ``config/gunicorn.py``, what ``manage.py serve`` and
the Docker image run). On PostgreSQL (``DATABASE_URL`` names one) it gets a PostgreSQL server of
its own (``initdb`` on a free port, ``max_connections=100``, PostgreSQL's default): filling the
shared server's connections would break everyone else on it. Otherwise the embedded default,
SQLite.

Each simulated trial is an unmanaged run (``POST unmanaged/``, what ``core_v2.init()`` sends)
driven by the SDK's own client (``headway.client``) with its run token and a trial's outage
budget: every second it reports 10 metrics at the next ``steps_completed``, and it heartbeats at
the interval the registry asked for (at most every 5 s). Readers use a user token and read what
the dashboard reads: an experiment, its trials, its overview chart data (every trial's series),
one trial and its chart data; a 503 is retried after its ``Retry-After``.

The trials and readers are threads spread over ``--client-processes`` processes (default 8),
as real trials are processes of their own: one process's 250 threads would queue for its
interpreter lock and count that wait as the server's.

Two phases on the same server, each with fresh trials: ``baseline`` (trials only) and
``loaded`` (trials + readers). Afterwards every series is read back whole. Printed per phase:
trials stopped (a call that failed for good, or a heartbeat that was told to stop; goal 0),
points lost (sent but not stored; goal 0), report p50/p99 (goal p99 <= 1 s) and heartbeat p99
(goal <= 0.5 s), each a call's whole time as the trial saw it, retries included. The last line
is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _server import Backend, Server, percentile
from _tiny import pick

from headway.client import RegistryAPI, Session

METRICS = 10
REPORT_EVERY_S = 1.0
HEARTBEAT_AT_MOST_S = 5.0
EXPERIMENTS = 10  # trials are spread over this many experiments (overview charts read them all)
TRIAL_OUTAGE_S = 600.0  # a trial's budget for an unanswering master (HEADWAY_MASTER_OUTAGE_SECONDS)
# Real trials are processes on other hosts, each with its own interpreter: 250 client threads in
# one process queue for its interpreter lock, and that wait would count as the server's latency.
CLIENT_PROCESSES = 8
CLIENT_START_S = 5.0  # time for the spawned client processes to import before the phase begins
CONFIG = {"name": "overload", "searcher": {"name": "single", "metric": "m0"}}


@dataclass
class Phase:
    """What one phase's threads saw (latencies in seconds)."""

    reports: list[float] = field(default_factory=list)
    heartbeats: list[float] = field(default_factory=list)
    reads: list[float] = field(default_factory=list)
    read_statuses: dict[int, int] = field(default_factory=dict)
    stopped: dict[int, str] = field(default_factory=dict)
    sent: dict[int, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def merge(self, other: Phase) -> None:
        """Add what another client process's threads saw."""
        self.reports += other.reports
        self.heartbeats += other.heartbeats
        self.reads += other.reads
        for status, count in other.read_statuses.items():
            self.read_statuses[status] = self.read_statuses.get(status, 0) + count
        self.stopped.update(other.stopped)
        self.sent.update(other.sent)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["lock"]  # a lock cannot cross processes; each process makes its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, lock=threading.Lock())


def _value(trial_id: int, step: int, metric: int) -> float:
    return trial_id * 1_000_000 + step * 10 + metric + 0.5


def _trial(url: str, started: Any, deadline: float, phase: Phase) -> None:
    session = Session(url, started.token, outage_seconds=TRIAL_OUTAGE_S)
    api = RegistryAPI.from_session(session)
    trial_id, run_id = started.trial_id, started.run_id
    heartbeat_every = min(HEARTBEAT_AT_MOST_S, started.heartbeat_interval_s)
    sent: list[int] = []
    step = 0
    next_report = time.monotonic()
    next_heartbeat = next_report + heartbeat_every / 2
    reports: list[float] = []
    heartbeats: list[float] = []
    why = ""
    try:
        while time.monotonic() < deadline and not why:
            now = time.monotonic()
            if now >= next_heartbeat:
                began = time.monotonic()
                answer = api.unmanaged_heartbeat(trial_id, run_id)
                heartbeats.append(time.monotonic() - began)
                why = answer.stop_requested and f"told to stop: {answer.stop_requested}"
                next_heartbeat += heartbeat_every
            elif now >= next_report:
                step += 1
                metrics = {f"m{i}": _value(trial_id, step, i) for i in range(METRICS)}
                body = {
                    "reports": [{"group": "training", "steps_completed": step, "metrics": metrics}]
                }
                began = time.monotonic()
                api.trial_metrics_report(trial_id, json.dumps(body).encode())
                reports.append(time.monotonic() - began)
                sent.append(step)
                next_report += REPORT_EVERY_S
            else:
                time.sleep(min(next_report, next_heartbeat) - now)
    except Exception as exc:  # the SDK gave up: the trial would have stopped
        why = f"{type(exc).__name__}: {str(exc)[:200]}"
    with phase.lock:
        phase.reports += reports
        phase.heartbeats += heartbeats
        phase.sent[trial_id] = sent
        if why:
            phase.stopped[trial_id] = why


def _get(http: requests.Session, url: str, phase: Phase, **params: Any) -> dict:
    """GET with the dashboard's patience: a 503 is retried after its Retry-After."""
    began = time.monotonic()
    while True:
        answer = http.get(url, params=params, timeout=120)
        with phase.lock:
            phase.read_statuses[answer.status_code] = (
                phase.read_statuses.get(answer.status_code, 0) + 1
            )
        if answer.status_code != 503:
            break
        time.sleep(float(answer.headers.get("Retry-After", "1")))
    with phase.lock:
        phase.reads.append(time.monotonic() - began)
    return answer.json() if answer.ok else {}


def _reader(url: str, token: str, trials: list[Any], index: int, deadline: float, phase: Phase):
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    api = f"{url}/api/v1"
    i = index
    try:
        while time.monotonic() < deadline:
            started = trials[i % len(trials)]
            experiment = started.experiment_id
            _get(http, f"{api}/experiments/{experiment}/", phase)
            _get(http, f"{api}/experiments/{experiment}/trials/", phase)
            _get(http, f"{api}/experiments/{experiment}/metrics/", phase, name="m0")
            _get(http, f"{api}/trials/{started.trial_id}/", phase)
            _get(http, f"{api}/trials/{started.trial_id}/metrics/", phase, max_points=2000)
            i += 7
    except requests.RequestException as exc:
        with phase.lock:
            phase.read_statuses[-1] = phase.read_statuses.get(-1, 0) + 1
        print(f"reader {index}: {exc!r}", file=sys.stderr)


def _start_trials(url: str, token: str, count: int, label: str) -> list[Any]:
    api = RegistryAPI.from_session(Session(url, token, max_retries=10))
    return [
        api.unmanaged_start(
            config=CONFIG,
            external_experiment_id=f"overload-{label}-{i % EXPERIMENTS}",
            external_trial_id=f"overload-{label}-{i}",
        )
        for i in range(count)
    ]


def _points_lost(url: str, token: str, phase: Phase) -> int:
    """Points sent but not stored (or stored with another value), over every trial's series."""
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    lost = 0
    for trial_id, steps in phase.sent.items():
        answer: dict = {}
        for _ in range(60):
            response = http.get(
                f"{url}/api/v1/trials/{trial_id}/metrics/",
                params={"group": "training", "max_points": "0"},
                timeout=120,
            )
            if response.status_code != 503:
                answer = response.json()
                break
            time.sleep(float(response.headers.get("Retry-After", "1")))
        stored = {
            s["name"]: dict(zip(s["steps"], s["values"], strict=True))
            for s in answer.get("series", [])
        }
        for metric in range(METRICS):
            series = stored.get(f"m{metric}", {})
            lost += sum(1 for s in steps if series.get(s) != _value(trial_id, s, metric))
            lost += max(0, len(series) - len(steps))  # a step stored that was never sent
    return lost


def _client(
    url: str,
    token: str,
    started: list[Any],
    part: int,
    parts: int,
    readers: int,
    begin: float,
    seconds: float,
) -> Phase:
    """One client process's share: every ``parts``-th trial and reader from ``part``, run from
    monotonic time ``begin`` (the same clock in every process) for ``seconds``."""
    time.sleep(max(0.0, begin - time.monotonic()))
    deadline = begin + seconds
    phase = Phase()
    threads = [
        threading.Thread(target=_trial, args=(url, s, deadline, phase))
        for s in started[part::parts]
    ]
    threads += [
        threading.Thread(target=_reader, args=(url, token, started, i, deadline, phase))
        for i in range(part, readers, parts)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return phase


def run_phase(
    url: str, token: str, label: str, trials: int, readers: int, seconds: float, processes: int = 1
):
    """Start ``trials`` trials, run them (and ``readers`` readers) for ``seconds`` from
    ``processes`` client processes (threads of one process: 1); figures."""
    started = _start_trials(url, token, trials, label)
    if processes <= 1:
        phase = _client(url, token, started, 0, 1, readers, time.monotonic(), seconds)
    else:
        # Spawned, not forked: each starts clean; they begin together once all are up.
        context = multiprocessing.get_context("spawn")
        begin = time.monotonic() + CLIENT_START_S
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            parts = [
                pool.submit(_client, url, token, started, p, processes, readers, begin, seconds)
                for p in range(processes)
            ]
            phase = Phase()
            for future in parts:
                phase.merge(future.result())
    lost = _points_lost(url, token, phase)
    figures = {
        "trials_stopped": len(phase.stopped),
        "points_lost": lost,
        "points_sent": sum(len(s) for s in phase.sent.values()) * METRICS,
        "report_p50_s": round(percentile(phase.reports, 0.5), 4) if phase.reports else None,
        "report_p99_s": round(percentile(phase.reports, 0.99), 4) if phase.reports else None,
        "heartbeat_p50_s": round(percentile(phase.heartbeats, 0.5), 4)
        if phase.heartbeats
        else None,
        "heartbeat_p99_s": round(percentile(phase.heartbeats, 0.99), 4)
        if phase.heartbeats
        else None,
        "heartbeats": len(phase.heartbeats),
        "reads": len(phase.reads),
        "read_p50_s": round(percentile(phase.reads, 0.5), 4) if phase.reads else None,
        "read_p99_s": round(percentile(phase.reads, 0.99), 4) if phase.reads else None,
        "read_statuses": {str(k): v for k, v in sorted(phase.read_statuses.items())},
    }
    for trial_id, why in list(phase.stopped.items())[:5]:
        print(f"  {label}: trial {trial_id} stopped: {why}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=pick(200, 3))
    parser.add_argument("--readers", type=int, default=pick(50, 2))
    parser.add_argument("--seconds", type=float, default=pick(60, 4))
    parser.add_argument(
        "--client-processes",
        type=int,
        default=pick(CLIENT_PROCESSES, 1),
        help="processes the simulated trials and readers are spread over (1: threads of one)",
    )
    args = parser.parse_args()
    with ExitStack() as stack:
        backend = overload_backend(stack)
        token = backend.prepare("overload")
        server = stack.enter_context(Server(backend, kind="serve"))
        out: dict[str, Any] = {
            "backend": backend.label,
            "trials": args.trials,
            "readers": args.readers,
            "seconds": args.seconds,
            "client_processes": args.client_processes,
        }
        for label, readers in (("baseline", 0), ("loaded", args.readers)):
            figures = run_phase(
                server.url,
                token,
                label,
                args.trials,
                readers,
                args.seconds,
                args.client_processes,
            )
            print(f"{label}: {json.dumps(figures)}")
            out[label] = figures
    loaded = out["loaded"]
    out["trials_stopped"] = loaded["trials_stopped"] + out["baseline"]["trials_stopped"]
    out["points_lost"] = loaded["points_lost"] + out["baseline"]["points_lost"]
    out["report_p99_s"] = loaded["report_p99_s"]
    out["heartbeat_p99_s"] = loaded["heartbeat_p99_s"]
    print(json.dumps(out))


def overload_backend(stack: ExitStack) -> Backend:
    """A private PostgreSQL server (default max_connections) when ``DATABASE_URL`` names
    PostgreSQL, else SQLite; removed when ``stack`` closes."""
    if os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        from tests.helpers_postgres import PrivatePostgres

        server = stack.enter_context(PrivatePostgres())
        backend = Backend.postgres(server.url("headway_bench_overload"))
        server_admin = server.url("postgres")
        import psycopg

        with psycopg.connect(server_admin, autocommit=True) as conn:
            conn.execute('CREATE DATABASE "headway_bench_overload"')
    else:
        backend = Backend.sqlite()
        backend.env.pop("REDIS_URL", None)
    stack.callback(backend.cleanup)
    return backend


if __name__ == "__main__":
    main()
