"""Placement at scale: the real scheduler with 1,000 hosts x 8 slots and 11,000 queued runs.

Runs the registry's own code in this process (``registry.scheduling``, ``schedule_run``,
``host_heartbeat``) on a database of its own: PostgreSQL when ``DATABASE_URL`` names a server (a
fresh database, dropped at the end), else a fresh SQLite file. No worker runs: every Celery
send is a no-op (below), so placed runs stay placed until the bench ends them.

1. Backfill (a small cluster of its own, 4 hosts x 8): every slot busy with 1-slot runs; then an
   8-slot run queued ahead of 40 1-slot runs, and 2 slots freed on each host: the 8-slot head
   reserves one host (its 2 free slots stay free), the 1-slot runs behind it take the 6 others;
   when its host's last runs end, the head starts there at once.
2. The queue: ``ONE_SLOT`` (10,000) 1-slot and ``EIGHT_SLOT`` (1,000) 8-slot runs (every 11th),
   created through ``schedule_run`` (its on-commit pass request switched off while they are
   created, so the queue is built first).
3. For 125, 250, 500 and 1,000 hosts (registered through ``host_heartbeat``): passes until one
   places nothing (the hosts are full: fill rate), then ``PASS_REPEATS`` passes that place
   nothing, timed (median: the pass cost; linear in hosts + queued runs is the goal).
4. Sustained placement at 1,000 hosts: ``CHURN_ROUNDS`` times, ``CHURN_EXITS`` random placed runs
   end and a pass places the queue's next runs in their slots: placements / time in passes.
5. Heartbeats while passes run: a child process runs passes back to back (with the same
   no-op send) while ``HEARTBEAT_THREADS`` threads send heartbeats (the upsert, then a pass
   request, as the host-agent heartbeat route does for a beat that adds capacity: the worst
   case, ``registry.lifecycle.host_agent.host_beat`` with no lease listed, without the HTTP
   request around it) for ``HEARTBEAT_S`` seconds: heartbeats handled per second (goal >= 200)
   and their latency.
6. The same over REST, with real Celery sends (``_scheduling_rest``): runs end by their hosts'
   exit reports to a web server, whose commits run the passes that refill the slots
   (``rest_placements_per_s_1000_hosts``, goal >= 100), then heartbeats over HTTP
   (``rest_heartbeats_per_s``, goal >= 200). ``--no-rest`` skips it; the queue is topped up
   first (``_scheduling_rest.QUEUE_FLOOR``): the churn of phase 4 nearly drains it.

The queue's trials belong to experiments of ``_scheduling_cluster.TRIALS_PER_EXPERIMENT`` each
(an exit locks and summarises its experiment: one experiment of 10,000 trials would measure
that instead).

Baseline in the same run, only with ``--baseline`` (not in tiny mode): the same script on the
commit before this placement code (``HEADWAY_BENCH_BASELINE``, default ``8e8a68d``), with time
budgets, since it places about 5 runs/s there; the REST phase is left out there, and a baseline
that fails is reported (``baseline_error``) instead of failing the bench. Ends with one JSON line
holding ``placements_per_s_1000_hosts`` and ``heartbeats_per_s`` (and the rest). ``--tiny`` (or
``HEADWAY_BENCH_TINY=1``): 16 hosts and 110 runs, in seconds; its numbers mean nothing.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

if "--tiny" in sys.argv:  # the same as HEADWAY_BENCH_TINY=1
    os.environ["HEADWAY_BENCH_TINY"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _scheduling_cluster as cluster
from _baseline import compare, run_baseline, wanted
from _scheduling_cluster import backfill_scenario, heartbeat, host_pool, place, queue_runs, register
from _scheduling_rest import rest_phases, run_threads_for
from _server import REPO, Backend, percentile
from _tiny import pick, tiny

STAGES = (125, 250, 500, 1000) if not tiny() else (2, 4, 8, 16)
ONE_SLOT, EIGHT_SLOT = pick(10_000, 100), pick(1_000, 10)
PASS_REPEATS = pick(5, 2)
CHURN_ROUNDS, CHURN_EXITS = pick(20, 3), pick(400, 4)
# 1,000 hosts beat from 1,000 processes; 16 threads stand for that concurrency (a heartbeat is
# a few round trips: one thread measures latency, not what the registry can take).
HEARTBEAT_THREADS, HEARTBEAT_S = pick(16, 4), pick(15, 2)
# Time budgets: the baseline's passes are slow; a phase stops when its budget is spent.
FILL_BUDGET_S = pick(240, 30)
CHURN_BUDGET_S = pick(120, 30)
BASELINE_REF = "8e8a68d"


# The simulated hosts beat only when the bench says so: timeouts long enough that none is lost
# in the middle of a phase (kept valid for the lease settings' checks). The pool is PostgreSQL's.
BENCH_ENV = {
    "HEADWAY_HOST_HEARTBEAT_SECONDS": "1200",
    "HEADWAY_HOST_TIMEOUT_SECONDS": "1800",
    "HEADWAY_LEASE_SECONDS": "3600",
    # At least the lease (a settings check), where the tree has it; ignored where not.
    "HEADWAY_OUTAGE_TOLERANCE_SECONDS": "3600",
    # Every heartbeat thread holds a connection of this process's pool (a master spreads them
    # over its server processes): a pool smaller than the threads made one wait 10 s and fail.
    "HEADWAY_DB_POOL_MAX_SIZE": str(HEARTBEAT_THREADS + 4),
}


def setup_django(store: Backend) -> None:
    """Migrate ``store``'s database and load Django in this process bound to it."""
    env = {k: v for k, v in BENCH_ENV.items() if store.label == "postgres" or "_POOL_" not in k}
    store.env.update(env)
    os.environ.update(env)
    store.manage("migrate", "--noinput", "-v", "0")
    for name in ("DATABASE_URL", "SECRET_KEY", "HEADWAY_VAR_DIR", "DJANGO_SETTINGS_MODULE"):
        os.environ[name] = store.env[name]
    os.environ["HEADWAY_QUEUE"] = store.env["HEADWAY_QUEUE"]
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    # BENCH ONLY: no worker consumes the host queues, so every task send (run and share tasks,
    # re-dispatches) is a no-op here; tests never do this.
    from config.celery import app

    app.send_task = lambda *args, **kwargs: None  # type: ignore[method-assign,assignment]


def pass_loop(seconds: float) -> None:
    """(child process) Run passes back to back for ``seconds``; print their count and median."""
    costs: list[float] = []
    print("ready", flush=True)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        costs.append(place()[1])
    print(json.dumps({"passes": len(costs), "pass_p50_ms": 1000 * statistics.median(costs)}))


def heartbeat_phase(names: list[str]) -> dict[str, Any]:
    """Phase 5: heartbeats from ``HEARTBEAT_THREADS`` threads while another process (the
    registry's side) runs passes back to back, as a master's passes and its hosts' heartbeats
    run in different processes."""
    from django.db import connection

    child = subprocess.Popen(
        [sys.executable, __file__, "--pass-loop", str(HEARTBEAT_S + 5)],
        cwd=REPO,
        env={**os.environ},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise RuntimeError("the pass loop did not start")
    stop = threading.Event()
    latencies: list[list[float]] = [[] for _ in range(HEARTBEAT_THREADS)]
    errors: list[str] = []

    def beats(k: int) -> None:
        mine = names[k::HEARTBEAT_THREADS]
        i = 0
        try:
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    heartbeat(mine[i % len(mine)])
                except Exception as exc:  # counted and reported
                    errors.append(repr(exc)[:200])
                latencies[k].append(time.perf_counter() - began)
                i += 1
        finally:
            connection.close()

    wall = run_threads_for(beats, HEARTBEAT_THREADS, HEARTBEAT_S, stop)
    out, _ = child.communicate(timeout=600)
    passes = json.loads(out.strip().splitlines()[-1])
    for error in sorted(set(errors))[:5]:
        print(f"heartbeat error: {error}", file=sys.stderr)
    done = [x for per in latencies for x in per]
    return {
        "heartbeats_per_s": round(len(done) / wall, 1),
        "heartbeat_p50_ms": round(1000 * statistics.median(done), 2) if done else None,
        "heartbeat_p95_ms": round(1000 * percentile(done, 0.95), 2) if done else None,
        "heartbeat_errors": len(errors),
        "passes_during_heartbeats": passes["passes"],
        "pass_p50_ms_during_heartbeats": round(passes["pass_p50_ms"], 1),
    }


def measure(store: Backend, rest: bool) -> dict[str, Any]:
    """Phases 1-5 (and 6 when ``rest``) on ``store``'s database, which Django is bound to;
    return the figures."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from registry.models import RunState, TrialRun

    User = get_user_model()
    cluster.STARTED = timezone.now()
    figures: dict[str, Any] = {"backend": connection.vendor}
    figures["backfill"] = backfill_scenario()
    print(f"backfill: {figures['backfill']}", flush=True)

    began = time.perf_counter()
    queue_runs(User.objects.create_user("bench-scale"), ONE_SLOT, EIGHT_SLOT, "scale")
    figures["queue_runs_per_s"] = round((ONE_SLOT + EIGHT_SLOT) / (time.perf_counter() - began))
    names: list[str] = []
    pass_ms: dict[int, float] = {}
    for hosts in STAGES:
        began = time.perf_counter()
        new = [f"host-{i:04d}" for i in range(len(names), hosts)]
        for name in new:
            register(name)
        names += new
        register_s = time.perf_counter() - began
        placed = spent = 0.0
        deadline = time.perf_counter() + FILL_BUDGET_S
        while time.perf_counter() < deadline:
            count, seconds = place()
            placed, spent = placed + count, spent + seconds
            if not count:
                break
        costs = [place()[1] for _ in range(PASS_REPEATS)]
        pass_ms[hosts] = 1000 * statistics.median(costs)
        print(
            f"{hosts} hosts: registered {len(new)} in {register_s:.1f} s; filled with "
            f"{placed:.0f} placements in {spent:.1f} s of passes; a pass placing nothing "
            f"{pass_ms[hosts]:.1f} ms",
            flush=True,
        )
        figures[f"fill_placements_per_s_{hosts}_hosts"] = round(placed / spent, 1) if spent else 0
        figures[f"pass_ms_{hosts}_hosts"] = round(pass_ms[hosts], 2)
    figures["pass_ratio_8x_hosts"] = round(pass_ms[STAGES[-1]] / pass_ms[STAGES[0]], 2)

    rng = random.Random(21)
    placed_runs = TrialRun.objects.filter(host__isnull=False, state=RunState.QUEUED)
    total = spent = 0.0
    deadline = time.perf_counter() + CHURN_BUDGET_S
    rounds = 0
    while rounds < CHURN_ROUNDS and time.perf_counter() < deadline:
        ids = list(placed_runs.values_list("id", flat=True))
        TrialRun.objects.filter(id__in=rng.sample(ids, min(CHURN_EXITS, len(ids)))).update(
            state=RunState.EXITED
        )
        count, seconds = place()
        total, spent, rounds = total + count, spent + seconds, rounds + 1
    figures["placements_per_s_1000_hosts"] = round(total / spent, 1) if spent else 0
    figures["churn_rounds"], figures["churn_placements"] = rounds, int(total)
    print(
        f"sustained: {total:.0f} placements in {spent:.2f} s of passes "
        f"({figures['placements_per_s_1000_hosts']}/s; goal >= 100)",
        flush=True,
    )
    figures.update(heartbeat_phase(names))
    print(
        f"heartbeats while passes run: {figures['heartbeats_per_s']}/s (goal >= 200), p50 "
        f"{figures['heartbeat_p50_ms']} ms, {figures['heartbeat_errors']} errors",
        flush=True,
    )
    figures["hosts"], figures["queued_runs"] = STAGES[-1], ONE_SLOT + EIGHT_SLOT
    if rest:
        owner = User.objects.create_user("bench-rest")
        figures.update(
            rest_phases(
                store,
                names,
                host_pool(),
                cluster.STARTED.isoformat(),
                lambda count: queue_runs(owner, count, 0, "rest"),
            )
        )
        print(
            f"over REST: {figures['rest_placements_per_s_1000_hosts']} placements/s (goal >= "
            f"100) from {figures['rest_exits']} exits (p50 {figures['rest_exit_p50_ms']} ms); "
            f"{figures['rest_heartbeats_per_s']} heartbeats/s (goal >= 200, p50 "
            f"{figures['rest_heartbeat_p50_ms']} ms)",
            flush=True,
        )
    return figures


def main() -> None:
    if "--pass-loop" in sys.argv:  # the heartbeat phase's child, on the parent's database
        import django

        sys.path.insert(0, str(REPO))
        django.setup()
        from config.celery import app

        app.send_task = lambda *args, **kwargs: None  # type: ignore[method-assign,assignment]
        pass_loop(float(sys.argv[sys.argv.index("--pass-loop") + 1]))
        return
    rest = "--no-rest" not in sys.argv
    store = Backend.from_environment("headway_bench_sched_scale")
    try:
        setup_django(store)
        figures = measure(store, rest)
    finally:
        from django.conf import settings

        if settings.configured:  # not when the migration failed
            from django.db import connections

            connections.close_all()
        store.cleanup()
    ref = wanted(BASELINE_REF) if "--baseline" in sys.argv and not tiny() else None
    if ref:
        try:
            # Without the REST phase: the baseline commit's host routes differ.
            baseline = run_baseline(ref, "scheduling_scale.py", ["--no-rest"])
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"the baseline {ref} failed: {exc}", file=sys.stderr)
            figures["baseline_error"] = str(exc)[-500:]
            print(json.dumps(figures))
            return
        keys = [
            "placements_per_s_1000_hosts",
            "fill_placements_per_s_1000_hosts",
            "heartbeats_per_s",
            "heartbeat_p50_ms",
            *(f"pass_ms_{hosts}_hosts" for hosts in STAGES),
            "pass_ratio_8x_hosts",
        ]
        figures.update(compare(figures, baseline, ref, keys))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
