"""An outage of the master longer than a lease plus its margin costs the running trial nothing.

The web server (the only way the host agent and the trial reach the master) is killed for
longer than ``HEADWAY_LEASE_SECONDS + HEADWAY_LEASE_MARGIN_SECONDS`` while the registry's
reaper (this process, with the same timings) keeps running: no host of the namespace is served,
so no lease is judged lost before the outage tolerance; the host keeps the trial running. When
the web server is back, the held logs, heartbeats, metrics and checkpoint registrations arrive:
the trial completes with run 1, no restart, every training step and checkpoint stored once.
"""

from __future__ import annotations

import time

import pytest

from tests.headway.client.test_faults_master_outage import FIXTURE
from tests.helpers import free_port, start_worker, stop_workers
from tests.helpers_web import WebServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HEARTBEAT, LEASE, MARGIN, GRACE, TOLERANCE = 1.0, 5.0, 4.0, 2.0, 300.0
TIMINGS = {
    "HEADWAY_HOST_HEARTBEAT_SECONDS": f"{HEARTBEAT:g}",
    "HEADWAY_HOST_TIMEOUT_SECONDS": "2",
    "HEADWAY_LEASE_SECONDS": f"{LEASE:g}",
    "HEADWAY_LEASE_MARGIN_SECONDS": f"{MARGIN:g}",
    "HEADWAY_KILL_GRACE_SECONDS": f"{GRACE:g}",
    "HEADWAY_OUTAGE_TOLERANCE_SECONDS": f"{TOLERANCE:g}",
}
OUTAGE = LEASE + MARGIN + 3 * HEARTBEAT + 5  # past every lease and margin, well within tolerance


def test_an_outage_of_the_master_longer_than_a_lease_keeps_the_trial_running(
    cluster, cluster_token, settings, tmp_path
):
    from registry import lifecycle
    from registry.models import TrialRun
    from tests.helpers_cluster import ClusterAPI

    # This process is the registry's reaper through the outage, with the master's timings.
    for name, value in TIMINGS.items():
        setattr(settings, name, float(value))
    port = free_port()
    pool = f"{cluster.queue}-mo"
    url = f"http://127.0.0.1:{port}"
    env = dict(cluster.env, **TIMINGS, HEADWAY_QUEUE=pool, HEADWAY_MASTER_URL=url)
    web = WebServer(port, env, tmp_path / "web.log")
    web.start()
    host = f"{pool}-host"
    worker_env = dict(env, HEADWAY_HOST_NAME=host, HEADWAY_SLOTS="1")
    worker = start_worker(worker_env, tmp_path / "worker.log", pool, host)
    api = ClusterAPI(url, cluster_token)
    try:
        trial = api.submit(FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 3.0})
        trial_id = trial["id"]
        api.wait_trial(trial_id, lambda t: t["latest_checkpoint"], "a checkpoint")
        web.kill()
        down = time.monotonic()
        while time.monotonic() - down < OUTAGE:
            assert lifecycle.reap_lost_runs() == []  # the master's own outage is not counted
            time.sleep(HEARTBEAT)
        assert TrialRun.objects.get(trial_id=trial_id, run_id=1).state == "RUNNING"
        web.start()
        final = api.wait_trial(
            trial_id, lambda t: t["state"] == "COMPLETED", "the trial to complete", timeout=300
        )
        assert final["restarts"] == 0 and final["run_id"] == 1  # never re-queued
        assert TrialRun.objects.filter(trial_id=trial_id).count() == 1
        assert TrialRun.objects.get(trial_id=trial_id, run_id=1).exit_code == 0
        steps, values = api.series(trial_id, "training", "loss")
        assert steps == list(range(1, 9))  # every epoch's report, each once
        assert len(values) == 8
        checkpoints = api.get(f"trials/{trial_id}/checkpoints/")["results"]
        assert sorted(c["steps_completed"] for c in checkpoints) == list(range(1, 9))
        assert not any("could not renew the lease" in line for line in api.logs(trial_id))
    finally:
        web.kill()
        stop_workers([worker])
