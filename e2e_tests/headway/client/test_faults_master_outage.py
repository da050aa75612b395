"""Security review finding, master restart: the web server killed during training; the trial
(and its host agent, which talks only to that web server) goes on and every report arrives once.

The unit tests of the session's outage budget are in tests/headway/client/test_faults_master_outage.py."""

from __future__ import annotations

import time

import pytest

from tests.headway.client.test_faults_master_outage import FIXTURE, OUTAGE_S
from tests.helpers import free_port, start_worker, stop_workers
from tests.helpers_web import WebServer


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("outage", [OUTAGE_S])
def test_finding_master_restart_does_not_crash_training(cluster, cluster_token, tmp_path, outage):
    from tests.helpers_cluster import ClusterAPI

    port = free_port()
    pool = f"{cluster.queue}-outage"
    url = f"http://127.0.0.1:{port}"
    # The default timings: the host keeps its trial through an outage of the master up to the
    # outage tolerance (docs/deployment.md, "Outages of the master").
    env = dict(cluster.env, HEADWAY_QUEUE=pool, HEADWAY_MASTER_URL=url)
    web = WebServer(port, env, tmp_path / "web.log")
    web.start()
    host = f"{pool}-host"
    worker_env = dict(env, HEADWAY_HOST_NAME=host, HEADWAY_SLOTS="1")
    worker = start_worker(worker_env, tmp_path / "worker.log", pool, host)
    api = ClusterAPI(url, cluster_token)
    try:
        trial = api.submit(FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 4.0})
        trial_id = trial["id"]
        # Kill the server once training is under way (a checkpoint was registered).
        api.wait_trial(trial_id, lambda t: t["latest_checkpoint"], "a checkpoint")
        web.kill()
        time.sleep(outage)
        web.start()
        final = api.wait_trial(
            trial_id, lambda t: t["state"] == "COMPLETED", "the trial to complete", timeout=300
        )
        assert final["restarts"] == 0
        steps, values = api.series(trial_id, "training", "loss")
        assert steps == list(range(1, 9))  # every epoch's report, each once
        assert len(values) == 8
        checkpoints = api.get(f"trials/{trial_id}/checkpoints/")["results"]
        assert sorted(c["steps_completed"] for c in checkpoints) == list(range(1, 9))
    finally:
        web.kill()
        stop_workers([worker])
