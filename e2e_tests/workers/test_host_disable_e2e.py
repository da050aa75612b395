"""Disabling a host (without drain) moves its running trial to another host, not charged a
restart: two real host agents of the test cluster, a Core API trial with ``max_restarts: 0``
that checkpoints every epoch and watches ``should_preempt()``; an admin disables the host it
runs on over REST (``POST hosts/{name}/disable/``)."""

from __future__ import annotations

import uuid

import pytest

from tests.helpers import start_worker, stop_workers, wait_for
from tests.workers.test_faults_worker_death import FIXTURE


@pytest.mark.integration
@pytest.mark.slow
def test_disable_moves_a_running_trial_to_another_host_without_a_restart(
    cluster, cluster_api, settings, tmp_path, django_user_model
):
    from rest_framework.authtoken.models import Token

    from registry.models import TrialRun, WorkerHost
    from tests.helpers_cluster import ClusterAPI

    pool = f"headway-disable-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    first, second = f"{pool}-a", f"{pool}-b"
    admin = ClusterAPI(
        cluster.url,
        Token.objects.create(user=django_user_model.objects.create_user("ops", is_staff=True)).key,
    )

    def agent(name: str):
        env = dict(cluster.env, HEADWAY_QUEUE=pool, HEADWAY_HOST_NAME=name, HEADWAY_SLOTS="1")
        worker = start_worker(env, tmp_path / f"{name}.log", pool, name)
        wait_for(lambda: WorkerHost.objects.filter(name=name).alive().exists(), 60, name)
        return worker

    workers = [agent(first)]
    try:
        trial = cluster_api.submit(
            FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 1.5}
        )
        cluster_api.wait_trial(trial["id"], lambda t: t["latest_checkpoint"], "a checkpoint")
        assert TrialRun.objects.get(trial_id=trial["id"], run_id=1).host.name == first
        workers.append(agent(second))

        status = admin.post(f"hosts/{first}/disable/", {"drain": False})
        assert status["state"] == "disabled"

        done = cluster_api.wait_trial(
            trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end"
        )
        assert done["state"] == "COMPLETED", cluster_api.logs(trial["id"])[-30:]
        assert done["restarts"] == 0
        runs = TrialRun.objects.filter(trial_id=trial["id"]).order_by("run_id")
        assert [run.host.name for run in runs] == [first, second]
        assert runs[0].exit_code == 0  # it checkpointed and stopped by itself
        logs = cluster_api.logs(trial["id"])
        assert any(f"host {first} disabled by an admin" in line for line in logs)
        assert any("preempted after epoch" in line for line in logs)
    finally:
        stop_workers(workers)
