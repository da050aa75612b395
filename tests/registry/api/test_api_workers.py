"""``GET /api/v1/workers/``: hosts, their slots, and the trial runs placed on each."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry import scheduling
from registry.models import TrialRun, WorkerHost
from tests.helpers import create_experiment, register_host, start_run

pytestmark = pytest.mark.django_db


def test_it_lists_hosts_with_slots_in_use_and_their_runs(api, settings):
    register_host("gpu-b", 1, gpu=True)
    register_host("gpu-a", 2, gpu=True)
    running = TrialRun.objects.get(trial__experiment_id=create_experiment(api).json()["id"])
    queued = TrialRun.objects.get(trial__experiment_id=create_experiment(api).json()["id"])
    scheduling.place_queued_runs()  # best fit: the first on gpu-b (1 slot), then gpu-a
    start_run(running.trial)
    response = api.get("/api/v1/workers/")
    assert response.status_code == 200
    hosts = response.json()["results"]
    assert [h["name"] for h in hosts] == ["gpu-a", "gpu-b"]
    a, b = hosts
    assert (a["slots"], a["slots_in_use"], a["devices"], a["gpu"], a["alive"]) == (
        2,
        1,
        ["0", "1"],
        True,
        True,
    )
    assert a["queue"] == f"{settings.CELERY_TASK_DEFAULT_QUEUE}.host.gpu-a"
    assert [(r["trial_id"], r["run_id"], r["state"], r["devices"]) for r in a["runs"]] == [
        (queued.trial_id, 1, "QUEUED", ["0"])
    ]
    assert [(r["trial_id"], r["state"], r["slots"]) for r in b["runs"]] == [
        (running.trial_id, "RUNNING", 1)
    ]
    assert b["runs"][0]["experiment_id"] == running.trial.experiment_id
    assert b["slots_in_use"] == 1 and b["runs"][0]["worker"] == "test"


def test_an_exited_run_no_longer_holds_its_slot(api, settings):
    register_host("gpu-a", 1, gpu=True)
    run = TrialRun.objects.get(trial__experiment_id=create_experiment(api).json()["id"])
    scheduling.place_queued_runs()
    TrialRun.objects.filter(id=run.id).update(state="EXITED")
    (host,) = api.get("/api/v1/workers/").json()["results"]
    assert (host["slots_in_use"], host["runs"]) == (0, [])


def test_a_host_without_recent_heartbeat_is_not_alive(api, settings):
    host = register_host("gpu-a", 1, gpu=True)
    old = timezone.now() - timedelta(seconds=settings.HEADWAY_HOST_TIMEOUT_SECONDS + 1)
    WorkerHost.objects.filter(id=host.id).update(heartbeat_at=old)
    answer = api.get("/api/v1/workers/gpu-a/").json()
    assert answer["name"] == "gpu-a" and answer["alive"] is False
    assert api.get("/api/v1/workers/nope/").status_code == 404


def test_it_needs_a_user_token(client, api, settings):
    register_host("gpu-a", 1, gpu=True)
    assert client.get("/api/v1/workers/").status_code in (401, 403)
    run = TrialRun.objects.get(trial__experiment_id=create_experiment(api).json()["id"])
    api.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    assert api.get("/api/v1/workers/").status_code == 403  # trial tokens reach their trial only


def test_it_is_read_only(api, settings):
    register_host("gpu-a", 1, gpu=True)
    assert api.post("/api/v1/workers/", {}, format="json").status_code == 405
    assert api.delete("/api/v1/workers/gpu-a/").status_code == 405


def test_it_is_in_the_openapi_schema(api):
    assert b"/api/v1/workers/" in api.get("/api/v1/schema/").content
