"""Second audit finding (Low): "a one-second PostgreSQL restart kills the running run (misleading
'could not be launched', re-queued only ~80 s later by the reaper)".

A Core API trial (8 epochs, a checkpoint each) runs under ``manage.py serve`` (gunicorn and a
worker, what ``make serve`` runs) on a private PostgreSQL server; once it has registered a
checkpoint the server is restarted (``pg_ctl restart -m fast``: every connection is cut). The
trial completes without a restart and with every epoch's metrics once; its log has no "could
not launch". The web server answers 503 + Retry-After while the database is away; the host
agent's log writes, heartbeats and kill checks are retried (workers/outage.py), and so are
the trial's REST calls (the SDK).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from bench._server import Backend, postgres_recreate
from tests.helpers import REPO, free_port, wait_for
from tests.helpers_postgres import PrivatePostgres

FIXTURE = REPO / "tests" / "fixtures" / "core_api"


def _healthy(url: str) -> bool:
    import requests

    try:
        return requests.get(f"{url}/healthz", timeout=2).ok
    except requests.RequestException:
        return False


@pytest.mark.integration
@pytest.mark.slow
def test_finding_db_restart_does_not_kill_the_running_run(tmp_path):
    from tests.helpers_cluster import ClusterAPI

    with PrivatePostgres() as server:
        url = server.url("headway_restart")
        assert postgres_recreate(url) is None
        backend = Backend.postgres(url)
        port = free_port()
        master = f"http://127.0.0.1:{port}"
        backend.env.update(
            SECRET_KEY="restart-test-" + "k" * 40,
            HEADWAY_MASTER_URL=master,
            HEADWAY_QUEUE=f"db-restart-{os.getpid()}",
            HEADWAY_HOST_NAME=f"db-restart-{os.getpid()}",
            LOG_LEVEL="INFO",
        )
        backend.env.pop("HEADWAY_TRIAL_USER", None)
        token = backend.prepare("restart")
        log = (tmp_path / "serve.log").open("w")
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--slots", "1"],
            cwd=REPO,
            env=backend.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: _healthy(master), 120, "manage.py serve")
            api = ClusterAPI(master, token)
            trial = api.submit(FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"sleep": 2.0})
            trial_id = trial["id"]
            api.wait_trial(trial_id, lambda t: t["latest_checkpoint"], "a checkpoint")
            server.restart()
            final = api.wait_trial(
                trial_id,
                lambda t: t["state"] in ("COMPLETED", "ERROR"),
                "the trial to end",
                timeout=300,
            )
            logs = "\n".join(api.logs(trial_id))
            assert final["state"] == "COMPLETED", (final, logs[-3000:])
            assert final["restarts"] == 0, final
            assert "could not launch" not in logs
            # The restart was felt (the web server answered 503 meanwhile) and ridden out.
            assert "database unavailable" in (tmp_path / "serve.log").read_text()
            steps, _ = api.series(trial_id, "training", "loss")
            assert steps == list(range(1, 9))
        finally:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=90)
            except subprocess.TimeoutExpired:
                serve.kill()
                serve.wait()
            backend.cleanup()
