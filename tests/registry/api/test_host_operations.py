"""``/api/v1/hosts/``: an admin lists, disables (or drains), enables and removes worker hosts;
placement skips disabled and draining hosts; a disabled host's running trial is preempted
without being charged a restart."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry import lifecycle, scheduling
from registry.models import HostToken, StopReason, TrialLog, TrialRun, WorkerHost
from tests.helpers import create_experiment, register_host, reload, start_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(django_user_model):
    client = APIClient()
    staff = django_user_model.objects.create_user("root", is_staff=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    return client


def _placed_run(api) -> TrialRun:
    run = TrialRun.objects.get(trial__experiment_id=create_experiment(api).json()["id"])
    scheduling.place_queued_runs()
    return reload(run)


def test_only_an_admin_operates_hosts(api, admin):
    register_host("gpu-a", 1)
    for method, path in [
        ("get", "/api/v1/hosts/"),
        ("post", "/api/v1/hosts/gpu-a/disable/"),
        ("post", "/api/v1/hosts/gpu-a/enable/"),
        ("delete", "/api/v1/hosts/gpu-a/"),
    ]:
        refused = getattr(api, method)(path, format="json")
        assert refused.status_code == 403, (method, path)
        assert refused.json()["detail"] == "Only an admin may operate hosts."
        assert getattr(APIClient(), method)(path).status_code == 401
    assert WorkerHost.objects.get(name="gpu-a").admin_state == "enabled"


def test_the_list_shows_state_slots_pool_heartbeat_and_address(api, admin):
    register_host("gpu-a", 2)
    scheduling.host_heartbeat(
        name="gpu-b",
        pool="default",
        queue="q",
        slots=1,
        devices=["cpu0"],
        gpu=False,
        started_at=timezone.now(),
        agent_id="a1",
        agent_pid=42,
        agent_address="10.0.0.7",
    )
    _placed_run(api)
    WorkerHost.objects.filter(name="gpu-a").update(heartbeat_at=timezone.now() - timedelta(hours=1))
    hosts = admin.get("/api/v1/hosts/").json()["hosts"]
    a, b = hosts
    assert (a["name"], a["state"], a["alive"], a["slots"], a["pool"]) == (
        "gpu-a",
        "enabled",
        False,
        2,
        "default",
    )
    assert a["heartbeat_age_seconds"] >= 3600
    assert (b["name"], b["slots_in_use"], b["address"], b["agent_pid"]) == (
        "gpu-b",
        1,
        "10.0.0.7",
        42,
    )
    assert b["runs"] == [f"trial {TrialRun.objects.get().trial_id} run 1"]


def test_unknown_host_is_404_and_bad_input_400_naming_the_field(admin):
    for method, path in [
        ("post", "/api/v1/hosts/nope/disable/"),
        ("post", "/api/v1/hosts/nope/enable/"),
        ("delete", "/api/v1/hosts/nope/"),
    ]:
        response = getattr(admin, method)(path, format="json")
        assert response.status_code == 404, (method, path)
        assert "nope" in response.json()["detail"]
    register_host("gpu-a", 1)
    bad = admin.post("/api/v1/hosts/gpu-a/disable/", {"drain": "yes"}, format="json")
    assert bad.status_code == 400 and "drain" in bad.json()["errors"]
    unknown = admin.post("/api/v1/hosts/gpu-a/disable/", {"drian": True}, format="json")
    assert unknown.status_code == 400 and "drian" in str(unknown.json())
    assert WorkerHost.objects.get(name="gpu-a").admin_state == "enabled"


@pytest.mark.parametrize("drain", [True, False])
def test_placement_skips_a_disabled_or_draining_host(api, admin, drain):
    register_host("gpu-a", 1)
    register_host("gpu-b", 4)
    answer = admin.post("/api/v1/hosts/gpu-a/disable/", {"drain": drain}, format="json")
    assert answer.status_code == 200
    assert answer.json()["state"] == ("draining" if drain else "disabled")
    # Best fit would pick gpu-a (1 slot): it is skipped.
    assert _placed_run(api).host.name == "gpu-b"
    WorkerHost.objects.filter(name="gpu-b").update(admin_state="draining")
    waiting = _placed_run(api)
    assert waiting.host is None
    assert "disabled or draining" in reload(waiting.trial).scheduling_message
    assert admin.post("/api/v1/hosts/gpu-a/enable/").json()["state"] == "enabled"
    scheduling.place_queued_runs()  # the pass the enable requests once it commits
    placed = TrialRun.objects.get(trial=waiting.trial, run_id=reload(waiting.trial).run_id)
    assert placed.host.name == "gpu-a"


def test_a_run_placed_but_not_claimed_moves_off_a_draining_host(api, admin):
    register_host("gpu-a", 1)
    run = _placed_run(api)
    assert run.host.name == "gpu-a"
    register_host("gpu-b", 1)
    admin.post("/api/v1/hosts/gpu-a/disable/", {"drain": True}, format="json")
    scheduling.place_queued_runs()
    assert reload(run).state == "EXITED"  # dropped before any process started
    assert TrialRun.objects.get(trial=run.trial, run_id=reload(run.trial).run_id).host.name == (
        "gpu-b"
    )


def test_drain_lets_a_running_trial_finish_and_disable_preempts_it(api, admin):
    register_host("gpu-a", 1)
    run = _placed_run(api)
    start_run(run.trial)
    admin.post("/api/v1/hosts/gpu-a/disable/", {"drain": True}, format="json")
    assert reload(run).stop_requested == StopReason.NONE
    assert (
        api.get("/api/v1/workers/gpu-a/").json()["admin_state"] == "draining"
    )  # everyone reads it
    status = admin.post("/api/v1/hosts/gpu-a/disable/", {}, format="json").json()
    assert status["state"] == "disabled"
    assert reload(run).stop_requested == StopReason.PREEMPT
    assert TrialLog.objects.filter(trial=run.trial, message__contains="disabled by an admin")


def test_disable_re_places_a_running_trial_without_charging_a_restart(api, admin):
    register_host("gpu-a", 1)
    run = _placed_run(api)
    trial = run.trial
    start_run(trial)
    register_host("gpu-b", 1)
    admin.post("/api/v1/hosts/gpu-a/disable/", {"drain": False}, format="json")
    # What the SDK does on should_preempt(): checkpoint, acknowledge, exit 0.
    lifecycle.trial_preempt_acknowledge(trial_id=trial.id, run_id=run.run_id)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=0)
    trial = reload(trial)
    assert (trial.state, trial.restarts) == ("ACTIVE", 0)
    scheduling.place_queued_runs()  # the pass the exit requests once it commits
    assert TrialRun.objects.get(trial=trial, run_id=trial.run_id).host.name == "gpu-b"


def test_remove_refuses_a_host_holding_runs_then_forgets_it_and_revokes_its_token(api, admin):
    register_host("gpu-a", 1)
    HostToken.issue("gpu-a")
    run = _placed_run(api)
    refused = admin.delete("/api/v1/hosts/gpu-a/")
    assert refused.status_code == 409
    assert f"trial {run.trial_id} run {run.run_id}" in refused.json()["detail"]
    assert WorkerHost.objects.filter(name="gpu-a").exists()
    TrialRun.objects.filter(id=run.id).update(state="EXITED")
    removed = admin.delete("/api/v1/hosts/gpu-a/")
    assert removed.status_code == 200
    assert removed.json() == {"name": "gpu-a", "token_revoked": True}
    assert not WorkerHost.objects.filter(name="gpu-a").exists()
    assert not HostToken.objects.live().filter(name="gpu-a").exists()
