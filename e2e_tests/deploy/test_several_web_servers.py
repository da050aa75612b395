"""Two web servers behind nginx (deploy/nginx.conf's upstream, docker-compose.yml's web1 and
web2): one is killed with SIGKILL while a trial trains, and nobody notices.

Two real gunicorn servers (``registry.management.services.web_command``) on their own loopback
ports sit behind the real nginx with deploy/nginx.conf; the host agent and the trial's SDK know only
nginx's address. Once the trial registered a checkpoint, the first web server is killed and
stays down: the trial completes as its first run (no restart), every epoch's report and
checkpoint is stored once. Requests that met the dead server were passed to the other by nginx
(idempotent ones) or answered 503 + Retry-After and resent by the client (writes).
"""

from __future__ import annotations

import pytest

from tests.headway.client.test_faults_master_outage import FIXTURE
from tests.helpers import free_port, require, serves_headway, start_worker, stop_workers, wait_for
from tests.helpers_nginx import nginx_binary, start_nginx, stop_nginx
from tests.helpers_web import WebServer


@pytest.mark.integration
@pytest.mark.slow
def test_a_web_server_killed_mid_trial_is_noticed_by_nobody(cluster, cluster_token, tmp_path):
    from tests.helpers_cluster import ClusterAPI

    require(nginx_binary() is not None, "nginx not installed (apt-get install nginx-light)")
    ports = (free_port(), free_port())
    listen_port = free_port()
    url = f"http://127.0.0.1:{listen_port}"
    pool = f"{cluster.queue}-two-web"
    env = dict(cluster.env, HEADWAY_QUEUE=pool, HEADWAY_MASTER_URL=url)
    webs = [WebServer(port, env, tmp_path / f"web{i + 1}.log") for i, port in enumerate(ports)]
    proxy = None
    worker = None
    try:
        for web in webs:
            web.start()
        proxy = start_nginx(tmp_path, listen_port, *ports)
        wait_for(lambda: serves_headway(url), 30, "nginx in front of both web servers")
        host = f"{pool}-host"
        worker_env = dict(env, HEADWAY_HOST_NAME=host, HEADWAY_SLOTS="1")
        worker = start_worker(worker_env, tmp_path / "worker.log", pool, host)
        api = ClusterAPI(url, cluster_token)
        trial = api.submit(FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 3.0})
        trial_id = trial["id"]
        api.wait_trial(trial_id, lambda t: t["latest_checkpoint"], "a checkpoint")
        webs[0].kill()
        final = api.wait_trial(
            trial_id, lambda t: t["state"] == "COMPLETED", "the trial to complete", timeout=300
        )
        assert final["restarts"] == 0
        steps, values = api.series(trial_id, "training", "loss")
        assert steps == list(range(1, 9))  # every epoch's report, each once
        assert len(values) == 8
        checkpoints = api.get(f"trials/{trial_id}/checkpoints/")["results"]
        assert sorted(c["steps_completed"] for c in checkpoints) == list(range(1, 9))
        assert webs[1].process is not None and webs[1].process.poll() is None
    finally:
        for web in webs:
            web.kill()
        stop_nginx(proxy)
        if worker is not None:
            stop_workers([worker])
