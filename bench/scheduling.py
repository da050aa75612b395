"""Scheduling throughput: a ``random`` search of one-batch trials through 2 workers × 2 slots.

Runs a web server and two worker processes (``manage.py worker`` with ``HEADWAY_SLOTS=2`` and
two host names) on a fresh database: PostgreSQL + Redis when ``DATABASE_URL`` / ``REDIS_URL``
name them, else the embedded SQLite + filesystem broker. The experiment is a ``random`` search of
``BENCH_TRIALS`` (default 500; 8 with ``HEADWAY_BENCH_TINY=1``) trials of a Core API script that trains one "batch" and reports
it, with ``max_concurrent_trials: 4`` (the cluster's slots), so each trial is created the moment
a slot frees up. From the recorded runs it measures
- trials started per second over the whole search,
- QUEUED -> claimed by a worker (``started_at - created_at``), median and p95: the time a run
  waits with a slot free (target: median <= 1 s),
- scheduling overhead: wall time / (sum of run times / 4 slots).
Baseline in the same run: the same script launched ``BENCH_TRIALS`` times by a 4-process pool
with no registry (local mode), so the ratio is what the cluster costs over bare processes.
Ends with one line holding a JSON object of the figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import (
    MANAGE,
    REPO,
    Backend,
    Server,
    percentile,
    single_file_model_definition,
)
from _tiny import pick

TRIALS = int(os.environ.get("BENCH_TRIALS", str(pick(500, 8))))
SLOTS_PER_HOST, HOSTS = 2, ("bench-a", "bench-b")

SCRIPT = """
import headway as det

local = det.get_cluster_info() is None
with det.core.init(max_length=1 if local else None) as ctx:
    for op in ctx.searcher.operations():
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
        op.report_completed(0.5)
"""


def config() -> dict:
    return {
        "name": "scheduling-bench",
        "entrypoint": "python one_batch.py",
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_length": 1,
            "max_trials": TRIALS,
            "max_concurrent_trials": SLOTS_PER_HOST * len(HOSTS),
        },
        "max_restarts": 0,
    }


def baseline(work_dir: Path) -> float:
    """Wall time of launching the script TRIALS times, 4 at a time, with no registry."""
    script = work_dir / "one_batch.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}

    def launch(_: int) -> None:
        subprocess.run(
            [sys.executable, str(script)], cwd=work_dir, env=env, check=True, capture_output=True
        )

    began = time.perf_counter()
    with ThreadPoolExecutor(SLOTS_PER_HOST * len(HOSTS)) as pool:
        list(pool.map(launch, range(TRIALS)))
    return time.perf_counter() - began


def run_records(store: Backend, experiment_id: int) -> list[tuple[float, float, float]]:
    """(created, started, ended) epoch seconds of every run of the experiment, from the DB."""
    # The bench's own settings (a deployment's DATABASE_URL requires SECRET_KEY).
    for name in ("DATABASE_URL", "SECRET_KEY", "HEADWAY_VAR_DIR", "DJANGO_SETTINGS_MODULE"):
        os.environ[name] = store.env[name]
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from registry.models import TrialRun

    rows = TrialRun.objects.filter(trial__experiment_id=experiment_id).values_list(
        "created_at", "started_at", "ended_at"
    )
    return [(c.timestamp(), s.timestamp(), e.timestamp()) for c, s, e in rows if s and e]


def main() -> None:
    store = Backend.from_environment("headway_bench_sched")
    try:
        figures = measure(store)
    finally:
        store.cleanup()
    print(json.dumps(figures))


def measure(store: Backend) -> dict[str, object]:
    """Run the search on ``store`` and return the figures (the JSON line's keys)."""
    token = store.prepare()
    workers: list[subprocess.Popen] = []
    try:
        with Server(store) as server:
            for host in HOSTS:
                env = {
                    **store.env,
                    "HEADWAY_MASTER_URL": server.url,
                    "HEADWAY_HOST_NAME": host,
                    "HEADWAY_SLOTS": str(SLOTS_PER_HOST),
                    "HEADWAY_HOST_HEARTBEAT_SECONDS": "2",
                    "HEADWAY_LOG_FLUSH_SECONDS": "0.2",
                }
                log = open(store.var_dir / f"worker-{host}.log", "wb")  # noqa: SIM115
                workers.append(
                    subprocess.Popen(
                        [sys.executable, MANAGE, "worker"],
                        cwd=REPO,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            http = requests.Session()
            http.headers["Authorization"] = f"Token {token}"
            api = f"{server.url}/api/v1"
            hosts_up = time.monotonic() + 60
            while len(http.get(f"{api}/workers/", timeout=30).json()["results"]) < len(HOSTS):
                if time.monotonic() > hosts_up:
                    logs = (store.var_dir / f"worker-{host}.log" for host in HOSTS)
                    tails = "\n".join(log.read_text()[-2000:] for log in logs)
                    raise RuntimeError(f"the workers did not register:\n{tails}")
                time.sleep(0.5)
            began = time.perf_counter()
            experiment = http.post(
                f"{api}/experiments/",
                json={
                    "config": config(),
                    "model_definition": single_file_model_definition("one_batch.py", SCRIPT),
                },
                timeout=60,
            ).json()
            while True:
                state = http.get(f"{api}/experiments/{experiment['id']}/", timeout=30).json()
                if state["state"] in ("COMPLETED", "CANCELED", "ERROR"):
                    break
                time.sleep(1.0)
            wall = time.perf_counter() - began
            if state["state"] != "COMPLETED":
                raise RuntimeError(f"the search ended {state['state']}")
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
    records = run_records(store, experiment["id"])
    waits = [started - created for created, started, _ in records]
    run_times = [ended - started for _, started, ended in records]
    first_start = min(started for _, started, _ in records)
    last_start = max(started for _, started, _ in records)
    slots = SLOTS_PER_HOST * len(HOSTS)
    ideal = sum(run_times) / slots
    with tempfile.TemporaryDirectory() as work:
        bare = baseline(Path(work))
    figures = {
        "backend": store.label,
        "trials": TRIALS,
        "runs": len(records),
        "slots": slots,
        "wall_s": round(wall, 2),
        "trials_started_per_s": round((len(records) - 1) / (last_start - first_start), 2),
        "queued_to_claimed_p50_s": round(statistics.median(waits), 3),
        "queued_to_claimed_p95_s": round(percentile(waits, 0.95), 3),
        "run_time_p50_s": round(statistics.median(run_times), 3),
        "overhead_wall_vs_runs_per_slot": round(wall / ideal, 3),
        "baseline_bare_processes_wall_s": round(bare, 2),
        "wall_vs_bare_processes": round(wall / bare, 2),
    }
    print(
        f"{TRIALS} one-batch trials on {slots} slots ({store.label}): "
        f"{figures['trials_started_per_s']} trials/s, QUEUED->claimed p50 "
        f"{figures['queued_to_claimed_p50_s']} s (target <= 1 s), p95 "
        f"{figures['queued_to_claimed_p95_s']} s; wall {wall:.1f} s = "
        f"{figures['overhead_wall_vs_runs_per_slot']} x the run times per slot; "
        f"bare processes {bare:.1f} s ({figures['wall_vs_bare_processes']} x)"
    )
    return figures


if __name__ == "__main__":
    main()
