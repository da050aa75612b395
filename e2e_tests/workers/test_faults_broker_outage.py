"""Finding: "a Redis restart kills the host agent for good, and an experiment submitted during
a Redis outage got a 500 although it was stored (a retry created a duplicate)".

``manage.py serve`` (web server, master worker with its beat, one host agent) runs on a
private ``redis-server`` (``tests.helpers_redis``: the shared one is never restarted) and a
PostgreSQL database of its own on ``DATABASE_URL``'s server.

- Redis is restarted (without persistence: every message is lost) while a Core API trial
  trains: the trial completes with no restart charged, every service is still running (serve
  stops them all when one exits) and the log shows the workers reconnecting.
- An experiment is submitted while Redis is down: 201, stored once; its run's task could not
  be sent, and the re-dispatch sends it once Redis is back, so the trial runs and completes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import types

import pytest

from bench._server import Backend, postgres_recreate
from tests.helpers import REPO, free_port, wait_for
from tests.helpers_redis import PrivateRedis

FIXTURE = REPO / "tests" / "fixtures" / "core_api"

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _healthy(url: str) -> bool:
    import requests

    try:
        return requests.get(f"{url}/healthz", timeout=2).ok
    except requests.RequestException:
        return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """``manage.py serve`` on a private Redis; yields ``api``, ``redis``, ``serve``, ``log``."""
    from tests.helpers_cluster import ClusterAPI

    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        pytest.skip("needs PostgreSQL: set DATABASE_URL=postgres://...")
    url = database_url.rsplit("/", 1)[0] + f"/headway_broker_outage_{os.getpid()}"
    problem = postgres_recreate(url)
    if problem is not None:
        pytest.skip(f"PostgreSQL unavailable: {problem}")
    base = tmp_path_factory.mktemp("broker-outage")
    backend = Backend.postgres(url)
    with PrivateRedis(base) as redis:
        port = free_port()
        master = f"http://127.0.0.1:{port}"
        backend.env.update(
            SECRET_KEY="broker-outage-test-" + "k" * 40,
            REDIS_URL=redis.url(),
            HEADWAY_MASTER_URL=master,
            HEADWAY_QUEUE=f"broker-outage-{os.getpid()}",
            HEADWAY_HOST_NAME=f"broker-outage-{os.getpid()}",
            # A run whose task was lost is sent again soon (the reaper runs every 2 s).
            HEADWAY_DISPATCH_TIMEOUT_SECONDS="5",
            HEADWAY_REAPER_INTERVAL_SECONDS="2",
            LOG_LEVEL="INFO",
        )
        backend.env.pop("HEADWAY_TRIAL_USER", None)
        backend.env.pop("HEADWAY_BROKER_URL", None)
        token = backend.prepare("outage")
        log_path = base / "serve.log"
        with log_path.open("wb") as log:
            serve = subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--port", str(port), "--slots", "1"],
                cwd=REPO,
                env=backend.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(lambda: _healthy(master), 120, "manage.py serve")
            yield types.SimpleNamespace(
                api=ClusterAPI(master, token), redis=redis, serve=serve, log=log_path
            )
        finally:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=90)
            except subprocess.TimeoutExpired:
                serve.kill()
                serve.wait()
            backend.cleanup()


def _log(stack) -> str:
    return stack.log.read_text(errors="replace")


def test_finding_a_redis_restart_during_training_costs_the_trial_nothing(stack):
    api = stack.api
    trial = api.submit(FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"sleep": 2.0})
    trial_id = trial["id"]
    api.wait_trial(trial_id, lambda t: t["latest_checkpoint"], "a checkpoint", timeout=300)
    connected = _log(stack).count("Connected to")
    stack.redis.stop()
    wait_for(lambda: "Connection to broker lost" in _log(stack), 120, "the workers to see Redis go")
    stack.redis.start()
    final = api.wait_trial(
        trial_id, lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end", timeout=300
    )
    logs = "\n".join(api.logs(trial_id))
    assert final["state"] == "COMPLETED", (final, logs[-3000:])
    assert final["restarts"] == 0, final
    steps, _ = api.series(trial_id, "training", "loss")
    assert steps == list(range(1, 9))
    # Every service is still up (serve stops them all when one exits), and they reconnected.
    wait_for(lambda: _log(stack).count("Connected to") > connected, 120, "a reconnection")
    assert stack.serve.poll() is None, _log(stack)[-5000:]
    assert "Unrecoverable error" not in _log(stack)


def test_finding_a_submission_during_a_redis_outage_is_stored_once_and_runs_later(stack):
    api = stack.api
    before = api.get("experiments/")["count"]
    seen = len(_log(stack))  # the log before this outage (the last test had its own)
    stack.redis.stop()
    try:
        # ClusterAPI.post asserts the 200/201 (a 500 here made clients submit again).
        trial = api.submit(FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"sleep": 0.1})
        # Redis stays away until the placed run's task was tried (the placement pass may run
        # after the request, from a heartbeat): its send failed, or was skipped after a failure.
        wait_for(
            lambda: any(
                line in _log(stack)[seen:] for line in ("could not be sent", "was not sent")
            ),
            120,
            "the run's task to be tried while Redis is down",
        )
    finally:
        stack.redis.start()
    assert api.get("experiments/")["count"] == before + 1
    final = api.wait_trial(
        trial["id"],
        lambda t: t["state"] in ("COMPLETED", "ERROR"),
        "the trial to run once Redis is back",
        timeout=300,
    )
    assert final["state"] == "COMPLETED", final
    assert final["restarts"] == 0, final
    assert stack.serve.poll() is None
    assert "Unrecoverable error" not in _log(stack)
