"""Bounded load over loopback: 20 threads report metrics while 20 read charts, against a real
server process, on SQLite and on PostgreSQL (the security review's "Fuzzing in the suite").

Every reporter owns one trial and sends batches of consecutive steps; readers poll the
experiment and trial chart endpoints with ``after_step`` as the dashboard does. Afterwards each
series is read back whole (``max_points=0``) and compared with what was sent: no report lost,
none duplicated, every value as sent; and no answer was a 5xx.

``HEADWAY_LOAD_SECONDS`` sets the duration (default 10 s in the suite; the issue's 30 s run is
recorded in docs/security.md).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
import requests

from bench._server import Backend, Server, postgres_recreate, single_file_model_definition
from tests.helpers import REPO, require
from tests.helpers_postgres import PrivatePostgres

REPORTERS = 20
READERS = 20
STEPS_PER_BATCH = 5
DURATION_S = float(os.environ.get("HEADWAY_LOAD_SECONDS", "10"))
# Pools close connections idle past config.database.POOL_MAX_IDLE_SECONDS, checked about as
# often: twice that plus a margin.
RECOVERY_BOUND_S = 90.0
CONFIG = {
    "name": "load",
    "entrypoint": "model_def:T",
    "hyperparameters": {"global_batch_size": 8},
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}},
}
MODEL = single_file_model_definition("model_def.py", "class T:\n    pass\n")


class ProductionServer(Server):
    """gunicorn with Headway's own settings (``config/gunicorn.py``, what ``make serve`` and the
    Docker image run), on this backend and a free port."""

    def _command(self) -> list[str]:
        return [
            sys.executable, "-m", "gunicorn", "-c", str(REPO / "config" / "gunicorn.py"),
            "--bind", f"127.0.0.1:{self.port}", "config.wsgi:application",
        ]  # fmt: skip


# The embedded demo's server (``manage.py runserver``, registry's own command) and production's.
SERVERS = {"runserver": lambda backend: Server(backend), "gunicorn": ProductionServer}


@dataclass
class Tally:
    """What the threads saw: status codes, transport errors, steps sent per trial."""

    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    sent: dict[int, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, response: requests.Response) -> None:
        with self.lock:
            self.statuses[(kind, response.status_code)] += 1
            if response.status_code >= 400:
                self.errors.append(f"{kind} {response.status_code}: {response.text[:200]}")


def _value(trial_id: int, step: int) -> float:
    return trial_id * 1_000_000 + step + 0.5


def _reporter(url, token, trial_id, deadline, tally):
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    step, sent = 0, []
    while time.monotonic() < deadline:
        steps = list(range(step + 1, step + 1 + STEPS_PER_BATCH))
        body = {
            "reports": [
                {
                    "group": "training",
                    "steps_completed": s,
                    "metrics": {"loss": _value(trial_id, s)},
                }
                for s in steps
            ]
        }
        try:
            response = http.post(f"{url}/api/v1/trials/{trial_id}/metrics/", json=body, timeout=60)
        except requests.RequestException as exc:
            with tally.lock:
                left = deadline - time.monotonic()
                tally.errors.append(f"report at step {step}, {left:.1f} s before the end: {exc!r}")
            break
        tally.record("report", response)
        if response.status_code == 200:
            sent += steps
        step += STEPS_PER_BATCH
    with tally.lock:
        tally.sent[trial_id] = sent


def _reader(url, token, experiment_id, trial_id, deadline, tally):
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    cursor = -1
    while time.monotonic() < deadline:
        try:
            overview = http.get(
                f"{url}/api/v1/experiments/{experiment_id}/metrics/",
                params={"name": "loss", "after_step": cursor},
                timeout=60,
            )
            tally.record("chart", overview)
            trial = http.get(
                f"{url}/api/v1/trials/{trial_id}/metrics/",
                params={"name": "loss", "after_step": cursor, "max_points": 2000},
                timeout=60,
            )
        except requests.RequestException as exc:
            with tally.lock:
                tally.errors.append(f"chart: {exc!r}")
            return
        tally.record("chart", trial)
        if trial.status_code == 200:
            steps = [s for series in trial.json()["series"] for s in series["steps"]]
            cursor = max([cursor, *steps])


def run_load(
    backend: Backend,
    duration_s: float,
    server_kind: str = "runserver",
    reporters: int = REPORTERS,
    readers: int = READERS,
) -> dict:
    """Serve ``backend`` with ``server_kind`` (a key of ``SERVERS``), run ``reporters`` and
    ``readers`` threads for ``duration_s``, read every series back; return the counts
    (statuses, reports sent, transport errors, mismatched trials, the read-back statuses)."""
    backend.env["SECRET_KEY"] = "load-test-" + "k" * 40
    token = backend.prepare("load")
    with SERVERS[server_kind](backend) as server:
        http = requests.Session()
        http.headers["Authorization"] = f"Token {token}"
        trials = []
        for _ in range(reporters):
            created = http.post(
                f"{server.url}/api/v1/experiments/",
                json={"config": CONFIG, "model_definition": MODEL},
                timeout=60,
            )
            assert created.status_code == 201, created.text
            experiment_id = created.json()["id"]
            listed = http.get(f"{server.url}/api/v1/experiments/{experiment_id}/trials/")
            trials.append((experiment_id, listed.json()["results"][0]["id"]))
        tally = Tally()
        deadline = time.monotonic() + duration_s
        threads = [
            threading.Thread(target=_reporter, args=(server.url, token, t, deadline, tally))
            for _, t in trials
        ] + [
            threading.Thread(
                target=_reader, args=(server.url, token, *trials[i % reporters], deadline, tally)
            )
            for i in range(readers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        mismatched = {}
        after: Counter = Counter()
        # After the load a reader retries 503s as the SDK does (Retry-After), within a bound:
        # an overloaded server may take until its pools shed idle connections to recover,
        # but it must recover (a sticky error would stay past the bound).
        recovered_by = time.monotonic() + RECOVERY_BOUND_S
        for _, trial_id in trials:
            while True:
                read_back = http.get(
                    f"{server.url}/api/v1/trials/{trial_id}/metrics/",
                    params={"group": "training", "name": "loss", "max_points": 0},
                    timeout=60,
                )
                if read_back.status_code != 503 or time.monotonic() > recovered_by:
                    break
                time.sleep(float(read_back.headers.get("Retry-After", "1")))
            after[read_back.status_code] += 1
            answer = read_back.json() if read_back.status_code == 200 else {"series": []}
            (series,) = answer["series"] or [{"steps": [], "values": []}]
            sent = tally.sent[trial_id]
            expected_values = [_value(trial_id, s) for s in sent]
            if series["steps"] != sent or series["values"] != expected_values:
                mismatched[trial_id] = (len(sent), len(series["steps"]))
    return {
        "statuses": dict(tally.statuses),
        "server_errors": sum(n for (_, code), n in tally.statuses.items() if code >= 500),
        "reports_sent": sum(len(s) for s in tally.sent.values()),
        "errors": tally.errors[:10],
        "mismatched": mismatched,
        "after_load": dict(after),
    }


def test_finding_dev_server_backlog_holds_40_simultaneous_connections():
    """runserver's listen backlog was Django's 10: 40 clients connecting at once got resets."""
    from registry.management.commands.runserver import Command

    assert Command.server_cls.request_queue_size >= REPORTERS + READERS


def _assert_held(result: dict) -> None:
    print(result)
    assert result["server_errors"] == 0, result
    assert result["errors"] == [], result
    assert result["mismatched"] == {}, result
    assert result["reports_sent"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("server_kind", sorted(SERVERS))
def test_load_on_sqlite_loses_nothing_and_never_answers_5xx(server_kind):
    backend = Backend.sqlite()
    try:
        _assert_held(run_load(backend, DURATION_S, server_kind))
    finally:
        backend.cleanup()


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("server_kind", sorted(SERVERS))
def test_load_on_postgres_loses_nothing_and_never_answers_5xx(server_kind):
    """On ``HEADWAY_LOAD_DATABASE_URL`` when set, else on a private PostgreSQL server: the
    server's pools and the load's clients take tens of connections, which on the suite's shared
    server left other tests' servers none (their requests answered 503 after the pool's wait)."""
    explicit = os.environ.get("HEADWAY_LOAD_DATABASE_URL")
    if explicit:
        _load_postgres(explicit, server_kind)
        return
    with PrivatePostgres() as server:
        _load_postgres(server.url("headway_load"), server_kind)


def _load_postgres(url: str, server_kind: str) -> None:
    why = postgres_recreate(url)
    require(why is None, f"PostgreSQL unreachable: {why}")
    backend = Backend.postgres(url)
    try:
        _assert_held(run_load(backend, DURATION_S, server_kind))
    finally:
        backend.cleanup()
