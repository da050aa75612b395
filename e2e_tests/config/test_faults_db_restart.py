"""Finding (issue #23, Low): "a one-second PostgreSQL restart kills the running run (misleading
'could not be launched', re-queued only ~80 s later by the reaper)".

A Core API trial (8 epochs, a checkpoint each) runs under ``manage.py serve`` (gunicorn and a
worker, what ``make serve`` runs) on a private PostgreSQL server; once it has registered a
checkpoint the server is restarted (``pg_ctl restart -m fast``: every connection is cut). The
trial completes without a restart and with every epoch's metrics once; its log has no "could
not launch". The worker's log writes, heartbeats and kill checks retry on a fresh connection
(workers/db_outage.py); the trial's REST calls get 503 + Retry-After from the web server and
are retried by the SDK.
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
    from tests.plugin import ClusterAPI

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
            # The restart was felt (the worker's connection was cut) and ridden out.
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


# The failing call drops the connection; a worker that ran a database test earlier still holds
# one, so the test needs database access though it never queries.
@pytest.mark.django_db
def test_finding_db_restart_supervision_survives_a_failing_call():
    """The supervision loop's calls: a transient database error is recorded, not raised; a bug
    is raised; ``exceeded`` once failing for the budget; ``retry_database`` returns once the
    database answers again."""
    from django.db import OperationalError

    from workers.db_outage import DatabaseOutage, retry_database

    def down():
        raise OperationalError("terminating connection due to administrator command")

    outage = DatabaseOutage(budget=0.0)
    assert outage.attempt(down) is False
    assert outage.exceeded and "administrator command" in outage.last_error
    with pytest.raises(ZeroDivisionError):
        DatabaseOutage(budget=60).attempt(lambda: 1 / 0)
    healthy = DatabaseOutage(budget=60)
    assert healthy.attempt(lambda: None) is True and not healthy.exceeded

    answers = iter([OperationalError("the database system is starting up"), "ok"])

    def flaky():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retry_database(flaky, budget=30, what="test") == "ok"
    with pytest.raises(OperationalError):
        retry_database(down, budget=0, what="test")
