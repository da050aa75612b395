"""The REST phases of ``bench/scheduling_scale.py``: exits and heartbeats through a real server.

The in-process phases time the placement pass alone. Here the hosts' side goes over HTTP to a
web server (gunicorn as ``manage.py serve`` runs it when gunicorn is installed, else Django's
threaded ``runserver``) on the same database, with the Celery sends real (the placed runs'
tasks go to the broker: Redis when ``REDIS_URL`` is set, else the filesystem transport):

- **exits**: each round, ``EXITS`` placed runs are marked started (a direct ``UPDATE``: the
  claim is not what is measured) and their hosts report them exited 0 through
  ``POST host-agent/trials/{t}/runs/{r}/exit/`` from ``THREADS`` threads, each with its host's
  token. Each exit runs the lifecycle (the trial completes, the searcher hears it), and its
  commit the placement pass that fills the freed slot and sends the new run's task. Placements
  per second of wall time over the rounds is the sustained figure.
- **heartbeats**: ``THREADS`` threads send ``POST host-agent/heartbeat/`` for the 1,000 hosts
  for ``HEARTBEAT_S`` seconds: the upsert alone, as the hosts are alive and their slots
  unchanged (such a beat asks for no placement pass: ``host_agent.host_beat``).
"""

from __future__ import annotations

import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from _server import Backend, Server, gunicorn_available, percentile
from _tiny import pick

ROUNDS = int(os.environ.get("HEADWAY_BENCH_REST_ROUNDS", pick(5, 2)))
EXITS = int(os.environ.get("HEADWAY_BENCH_REST_EXITS", pick(200, 4)))
THREADS, HEARTBEAT_S = pick(16, 4), pick(15, 2)
# Runs left waiting without a host while the exits run (a pass reads every one of them): the
# queue is topped up to this many plus the runs the exits will place (``rest_phases``).
QUEUE_FLOOR = pick(8000, 100)


def _keys(names: list[str]) -> dict[str, str]:
    """A host token for each host (issued here as an admin would), by host name."""
    from registry.models import HostToken

    return {name: HostToken.issue(name)[1] for name in names}


def _per_thread(keys: dict[str, str]) -> Callable[[str], requests.Session]:
    """One ``requests.Session`` per thread and host token (keep-alive, as a host agent has)."""
    local = threading.local()

    def session(host: str) -> requests.Session:
        if not hasattr(local, "sessions"):
            local.sessions = {}
        if host not in local.sessions:
            found = requests.Session()
            found.headers["Authorization"] = f"Token {keys[host]}"
            local.sessions[host] = found
        return local.sessions[host]

    return session


def _placed_count() -> int:
    from registry.models import RunState, TrialRun

    return TrialRun.objects.filter(host__isnull=False, state=RunState.QUEUED).count()


def exits(server: Server, keys: dict[str, str], rng: random.Random) -> dict[str, Any]:
    """The exits phase (module docstring); returns its figures."""
    from django.utils import timezone

    from registry.models import RunState, TrialRun

    session = _per_thread(keys)
    latencies: list[float] = []
    errors: list[str] = []
    placed = exited = 0
    wall = 0.0

    def exit_one(row: tuple[int, int, str]) -> None:
        trial_id, run_id, host = row
        url = f"{server.url}/api/v1/host-agent/trials/{trial_id}/runs/{run_id}/exit/"
        began = time.perf_counter()
        answer = session(host).post(url, json={"exit_code": 0}, timeout=120)
        latencies.append(time.perf_counter() - began)
        if answer.status_code != 200:
            errors.append(f"{answer.status_code} {answer.text[:200]}")

    for _ in range(ROUNDS):
        rows = list(
            TrialRun.objects.filter(host__isnull=False, state=RunState.QUEUED)
            .filter(host__name__in=list(keys))
            .values_list("id", "trial_id", "run_id", "host__name")
        )
        chosen = rng.sample(rows, min(EXITS, len(rows)))
        now = timezone.now()
        TrialRun.objects.filter(id__in=[row[0] for row in chosen]).update(
            state=RunState.RUNNING, worker="bench", started_at=now, heartbeat_at=now
        )
        before = _placed_count()
        began = time.perf_counter()
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(exit_one, [row[1:] for row in chosen]))
        wall += time.perf_counter() - began
        # Placed now = placed before - the runs that ran + the runs the exits' passes placed.
        placed += _placed_count() - (before - len(chosen))
        exited += len(chosen)
    for error in sorted(set(errors))[:5]:
        print(f"exit error: {error}", flush=True)
    return {
        "rest_exits": exited,
        "rest_exit_placements": placed,
        "rest_placements_per_s_1000_hosts": round(placed / wall, 1) if wall else 0,
        "rest_exits_per_s": round(exited / wall, 1) if wall else 0,
        "rest_exit_p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
        "rest_exit_p95_ms": round(1000 * percentile(latencies, 0.95), 1) if latencies else None,
        "rest_exit_errors": len(errors),
    }


def heartbeats(server: Server, keys: dict[str, str], pool: str, started: str) -> dict[str, Any]:
    """The heartbeats phase (module docstring); returns its figures."""
    from django.conf import settings

    session = _per_thread(keys)
    names = list(keys)
    body = {
        "pool": pool,
        "namespace": settings.CELERY_TASK_DEFAULT_QUEUE,
        "devices": [str(i) for i in range(8)],
        "gpu": True,
        "started_at": started,
    }
    stop = threading.Event()
    latencies: list[list[float]] = [[] for _ in range(THREADS)]
    errors: list[str] = []

    def beats(k: int) -> None:
        mine, i = names[k::THREADS], 0
        while not stop.is_set():
            began = time.perf_counter()
            answer = session(mine[i % len(mine)]).post(
                f"{server.url}/api/v1/host-agent/heartbeat/", json=body, timeout=60
            )
            latencies[k].append(time.perf_counter() - began)
            if answer.status_code != 200:
                errors.append(f"{answer.status_code} {answer.text[:200]}")
            i += 1

    wall = run_threads_for(beats, THREADS, HEARTBEAT_S, stop)
    done = [x for per in latencies for x in per]
    for error in sorted(set(errors))[:5]:
        print(f"heartbeat error: {error}", flush=True)
    return {
        "rest_heartbeats_per_s": round(len(done) / wall, 1),
        "rest_heartbeat_p50_ms": round(1000 * statistics.median(done), 1) if done else None,
        "rest_heartbeat_p95_ms": round(1000 * percentile(done, 0.95), 1) if done else None,
        "rest_heartbeat_errors": len(errors),
    }


def run_threads_for(
    body: Callable[[int], None], threads: int, seconds: float, stop: threading.Event
) -> float:
    """Run ``body(k)`` in ``threads`` threads, set ``stop`` after ``seconds``, join them;
    returns the wall time in seconds from the first start to the last join."""
    started = [threading.Thread(target=body, args=(k,)) for k in range(threads)]
    began = time.perf_counter()
    for thread in started:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in started:
        thread.join()
    return time.perf_counter() - began


def rest_phases(
    store: Backend, names: list[str], pool: str, started: str, queue: Callable[[int], None]
) -> dict[str, Any]:
    """Both REST phases against one server of ``store``'s database; ``queue(n)`` queues ``n``
    more 1-slot runs first, so that ``QUEUE_FLOOR`` runs still wait after the last exit. The
    broker's queues the placed runs' tasks went to are deleted afterwards (nobody consumes
    them)."""
    from config.celery import app
    from registry.models import RunState, TrialRun
    from registry.scheduling import place_queued_runs

    waiting = TrialRun.objects.filter(state=RunState.QUEUED, host__isnull=True).count()
    queue(max(0, QUEUE_FLOOR + ROUNDS * EXITS - waiting))
    # Slots left free before the exits are filled now, so the rounds count only the exits' own.
    while place_queued_runs():
        pass
    keys = _keys(names)
    kind = "serve" if gunicorn_available() else "runserver"
    figures: dict[str, Any] = {
        "rest_server": kind,
        "rest_queued_runs": QUEUE_FLOOR + ROUNDS * EXITS,
    }
    with Server(store, kind=kind) as server:
        figures.update(exits(server, keys, random.Random(7)))
        figures.update(heartbeats(server, keys, pool, started))
    _delete_queues(app, names)
    return figures


def _delete_queues(app: Any, names: list[str]) -> None:
    """Delete the hosts' queues and their bindings from a Redis broker (the filesystem broker's
    folder goes with the bench's var dir). By key: the bench process never declared them, so
    kombu's ``queue_delete`` does not know their bindings."""
    from django.conf import settings

    if not str(app.conf.broker_url).startswith("redis"):
        return
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE
    with app.connection_for_write() as connection:
        client = connection.default_channel.client
        for queue in [namespace, *(f"{namespace}.host.{name}" for name in names)]:
            client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
