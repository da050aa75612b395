"""Preemption signal latency: pause request -> ``should_preempt()`` True -> trial PAUSED.

Runs a real cluster (``manage.py serve``: web server + Celery worker; SQLite and the filesystem
broker, or PostgreSQL + Redis when ``DATABASE_URL`` / ``REDIS_URL`` name them) in a temp var dir and a Core API trial whose loop does 5 ms "batches" and checks
``should_preempt()`` after each. Each round: wait until the run is up, POST ``trials/{id}/pause``,
and measure
- signal latency: request sent -> ``should_preempt()`` returned True (wall clock, same host),
- pause latency: request sent -> trial PAUSED with its run EXITED, minus the checkpoint write,
then activate (the next run resumes) and repeat. Baseline measured in the same run: the
round trip of ``GET /healthz`` on the same server (the floor any signal pays), and the expected
latency of the fixed 1 s polling this replaced (0.5 s on average, analytic).
Targets (issue): signal p50 <= 0.5 s; pause <= 2 s + one batch.
Ends with one line holding a JSON object of the figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import REPO, Backend, free_port, percentile, single_file_model_definition
from _tiny import pick

ROUNDS = int(os.environ.get("BENCH_ROUNDS", str(pick(8, 2))))
BATCH_S = 0.005

SCRIPT = f"""
import json, time
import headway as det

with det.core.init() as ctx:
    print("READY", flush=True)
    step = 0
    while True:
        time.sleep({BATCH_S})
        step += 1
        if ctx.preempt.should_preempt():
            t = time.time()
            began = time.perf_counter()
            with ctx.checkpoint.store_path({{"steps_completed": step}}) as (path, _):
                (path / "weights.bin").write_bytes(b"0" * 1_000_000)
            print(json.dumps({{"preempted_at": t, "checkpoint_s": time.perf_counter() - began}}), flush=True)
            break
"""
CONFIG = "name: preempt-bench\nentrypoint: python loop.py\nsearcher: {name: single, metric: loss, max_length: 1}\n"


def wait(predicate, timeout: float, what: str, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError(f"timed out waiting for {what}")


def main() -> None:
    # The embedded default, or PostgreSQL (+ Redis) when DATABASE_URL (and REDIS_URL) name them.
    backend = Backend.from_environment("headway_bench_preempt")
    var_dir = backend.var_dir
    port = free_port()
    env = {**backend.env, "LOG_LEVEL": "INFO"}
    env.update(HEADWAY_PORT=str(port), HEADWAY_LOG_FLUSH_SECONDS="0.05")
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, cwd=REPO)
    token = subprocess.run(
        [*manage, "headway_token", "bench", "--create"], env=env, check=True, cwd=REPO,
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    with open(var_dir / "serve.log", "wb") as serve_log:  # the child keeps its own descriptor
        server = subprocess.Popen(
            [*manage, "serve", "--port", str(port)], env=env, cwd=REPO,
            stdout=serve_log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    api = f"http://127.0.0.1:{port}/api/v1"
    try:
        wait(lambda: _ok(http, f"http://127.0.0.1:{port}/healthz"), 60, "the server", 0.2)
        floor = []
        for _ in range(50):
            began = time.perf_counter()
            http.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
            floor.append(time.perf_counter() - began)
        experiment = http.post(
            f"{api}/experiments/",
            json={
                "config": CONFIG,
                "model_definition": single_file_model_definition("loop.py", SCRIPT),
            },
            timeout=30,
        ).json()
        trial_id = http.get(f"{api}/experiments/{experiment['id']}/trials/", timeout=30).json()[
            "results"
        ][0]["id"]
        signal, paused, checkpoint = [], [], []

        def messages() -> list[str]:
            logs = http.get(f"{api}/trials/{trial_id}/logs/", params={"limit": 10000}, timeout=30)
            return [line["message"] for line in logs.json()["results"]]

        for round_no in range(1, ROUNDS + 1):
            wait(lambda n=round_no: messages().count("READY") >= n, 120, f"run {round_no}", 0.05)
            time.sleep(1.0)  # let the watcher's long-poll settle, as in a long-running trial
            sent = time.time()
            http.post(f"{api}/trials/{trial_id}/pause", timeout=30).raise_for_status()
            wait(
                lambda: (t := http.get(f"{api}/trials/{trial_id}/", timeout=30).json())["state"] == "PAUSED"
                and t["run_state"] == "EXITED",
                60, "PAUSED", 0.01,
            )  # fmt: skip
            done = time.time()
            report = [json.loads(m) for m in messages() if m.startswith('{"preempted_at"')][
                round_no - 1
            ]
            signal.append(report["preempted_at"] - sent)
            checkpoint.append(report["checkpoint_s"])
            paused.append(done - sent - report["checkpoint_s"])
            print(f"round {round_no}: signal {signal[-1] * 1000:7.1f} ms   paused {paused[-1] * 1000:7.1f} ms   "
                  f"(checkpoint write {report['checkpoint_s'] * 1000:.1f} ms)", flush=True)  # fmt: skip
            http.post(f"{api}/trials/{trial_id}/activate", timeout=30).raise_for_status()
    finally:
        # serve's own stop: the worker (a run may be starting), then the web server. The bound
        # is generous; the time it took is reported (serve_exit_s).
        server.terminate()
        began = time.monotonic()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            print((var_dir / "serve.log").read_text()[-4000:], file=sys.stderr)
            raise
        finally:
            backend.cleanup()
    serve_exit_s = time.monotonic() - began
    figures = {
        "rounds": ROUNDS,
        "signal_p50_s": round(statistics.median(signal), 4),
        "signal_p90_s": round(percentile(signal, 0.9), 4),
        "paused_p50_s": round(statistics.median(paused), 4),
        "paused_max_s": round(max(paused), 4),
        "checkpoint_write_p50_s": round(statistics.median(checkpoint), 4),
        "healthz_p50_s": round(statistics.median(floor), 5),
        "signal_p50_vs_healthz": round(statistics.median(signal) / statistics.median(floor), 1),
        "signal_p50_vs_1s_polling": round(statistics.median(signal) / 0.5, 3),
        "batch_s": BATCH_S,
        "serve_exit_s": round(serve_exit_s, 2),
    }
    print(f"signal latency p50 {figures['signal_p50_s']:.3f} s (target <= 0.5 s); request -> PAUSED "
          f"p50 {figures['paused_p50_s']:.3f} s, max {figures['paused_max_s']:.3f} s excluding the checkpoint "
          f"write (target <= 2 s + one {BATCH_S * 1000:.0f} ms batch)")  # fmt: skip
    print(json.dumps(figures))


def _ok(http: requests.Session, url: str) -> bool:
    try:
        return http.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


if __name__ == "__main__":
    main()
