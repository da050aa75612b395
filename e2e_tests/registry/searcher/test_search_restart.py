"""A search survives a restart of the web server: the searcher state saved with every event is
all a new process needs (a fresh database, a web process, the master's worker and a host agent
of its own; the agent talks only to the web server, so it lives through the outage too)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.helpers import IN_CI, REPO, b64, free_port, require, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORE_SEARCH = REPO / "tests" / "fixtures" / "core_search"

CONFIG = {
    "name": "restart-mid-search",
    "entrypoint": "python train.py",
    "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 0.8}, "sleep": 0.25},
    "searcher": {
        "name": "random",
        "metric": "loss",
        "max_length": 8,
        "max_trials": 6,
        "max_concurrent_trials": 2,
    },
    "max_restarts": 2,
}


class Deployment:
    """Web server and worker processes on a database of their own."""

    def __init__(self, env: dict[str, str], port: int, log_dir: Path) -> None:
        self.env, self.port, self.log_dir = env, port, log_dir
        self.url = f"http://127.0.0.1:{port}"
        self.processes: dict[str, subprocess.Popen] = {}

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def start(self, name: str, *args: str, command: list[str] | None = None) -> None:
        """Start ``manage.py ARGS`` (or ``command``) as process ``name``."""
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (owned by the child)
        self.processes[name] = subprocess.Popen(
            command or [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_web(self) -> None:
        self.start("web", "runserver", "--noreload", f"127.0.0.1:{self.port}")

        def healthy() -> bool:
            try:
                return requests.get(f"{self.url}/healthz", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_for(healthy, 60, "the web server to answer")

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def close(self) -> None:
        for name in list(self.processes):
            self.stop(name)


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    require(db["ENGINE"].endswith("postgresql"), "needs PostgreSQL: set DATABASE_URL")
    user = db.get("USER") or "postgres"
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    password = db.get("PASSWORD") or ""
    name = f"headway_restart_{uuid.uuid4().hex[:8]}"
    admin = dict(host=host, port=port, user=user, password=password, dbname="postgres")
    try:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
    except psycopg.Error as exc:
        if IN_CI:
            raise
        pytest.skip(f"cannot create a database: {exc}")
    auth = f":{password}" if password else ""
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{user}{auth}@{host}:{port}/{name}",
        REDIS_URL=settings.REDIS_URL,
        HEADWAY_QUEUE=f"headway-restart-{uuid.uuid4().hex[:8]}",
        HEADWAY_HOST_NAME=f"restart-{uuid.uuid4().hex[:8]}",
        HEADWAY_SLOTS="2",
        HEADWAY_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        HEADWAY_WORK_DIR=str(tmp_path / "work"),
        HEADWAY_VAR_DIR=str(tmp_path / "var"),
        HEADWAY_HOST_HEARTBEAT_SECONDS="1",
        HEADWAY_LOG_FLUSH_SECONDS="0.2",
    )
    web_port = free_port()
    env["HEADWAY_MASTER_URL"] = f"http://127.0.0.1:{web_port}"
    env.pop("DJANGO_SETTINGS_MODULE", None)
    deployment = Deployment(env, web_port, tmp_path)
    try:
        deployment.manage("migrate", "--noinput", "-v", "0")
        yield deployment
    finally:
        deployment.close()
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_search_finishes_exactly_after_the_web_server_restarts_mid_search(deployment):
    from headway.cli import pack_model_definition

    token = deployment.manage("headway_token", "alice", "--create")
    from registry.management.services import master_worker_command

    deployment.start_web()
    deployment.start("master", command=master_worker_command(deployment.env["HEADWAY_QUEUE"]))
    deployment.start("worker", "worker")
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    api = f"{deployment.url}/api/v1"
    model = b64(pack_model_definition(CORE_SEARCH, 1 << 20))
    response = http.post(
        f"{api}/experiments/", json={"config": CONFIG, "model_definition": model}, timeout=60
    )
    assert response.status_code == 201, response.text
    experiment_id = response.json()["id"]

    def trials() -> list[dict]:
        answer = http.get(f"{api}/experiments/{experiment_id}/trials/", timeout=30)
        return answer.json()["results"]

    wait_for(
        lambda: sum(t["state"] == "COMPLETED" for t in trials()) >= 2, 180, "two trials to end"
    )
    deployment.stop("web")  # trials keep running; their reports wait for the server
    time.sleep(3)  # a deliberate outage of 3 s, long enough for reports to meet it
    deployment.start_web()

    def ended() -> dict | None:
        experiment = http.get(f"{api}/experiments/{experiment_id}/", timeout=30).json()
        return experiment if experiment["state"] in ("COMPLETED", "ERROR", "CANCELED") else None

    experiment = wait_for(ended, 300, "the search to end")
    assert experiment["state"] == "COMPLETED" and experiment["progress"] == 1.0
    final = trials()
    assert sorted(int(t["request_id"]) for t in final) == [1, 2, 3, 4, 5, 6]  # no duplicates
    assert all(t["state"] == "COMPLETED" for t in final)
    assert all(t["searcher_completed_length"] == 8 for t in final)
    for trial in final:
        series = http.get(
            f"{api}/trials/{trial['id']}/metrics/",
            params={"group": "training", "name": "loss", "max_points": 0},
            timeout=30,
        ).json()["series"][0]
        assert series["steps"] == list(range(1, 9))  # every batch once
