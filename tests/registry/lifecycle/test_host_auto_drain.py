"""A host on which runs keep being lost before their ranks start is drained automatically
(``registry.lifecycle._host_health``), with the reason shown to admins; a run that starts there
resets the count, and an admin's enable puts it back in service."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry import lifecycle, scheduling
from registry.models import HostAdminState, Trial, WorkerHost
from tests.helpers import TINY_MODEL, register_host, reload
from tests.registry.lifecycle.test_lost_before_start import claim_and_lose

pytestmark = pytest.mark.django_db


@pytest.fixture
def lose_on(django_user_model):
    """``lose_on(host, start=False)``: a new one-slot trial placed on ``host``, its run
    claimed there (and started when ``start``), then lost; returns the trial."""
    owner = django_user_model.objects.create_user("auto-drain")

    def lose(host: str, *, start: bool = False) -> Trial:
        config = {
            "entrypoint": "python train.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 10},
        }
        trial = lifecycle.experiment_create(
            owner=owner, config_source=config, model_definition=TINY_MODEL
        ).trials.get()
        scheduling.place_queued_runs()
        assert trial.runs.get(run_id=reload(trial).run_id).host.name == host
        claim_and_lose(trial, start=start)
        return trial

    return lose


def _host(name: str) -> WorkerHost:
    return WorkerHost.objects.get(name=name)


def test_the_third_run_lost_before_start_in_a_row_drains_the_host(lose_on, django_user_model):
    register_host("flaky", 10)
    for _ in range(2):
        lose_on("flaky")
    assert _host("flaky").admin_state == HostAdminState.ENABLED
    lose_on("flaky")
    host = _host("flaky")
    assert host.admin_state == HostAdminState.DRAINING  # no new runs; running ones finish
    assert host.admin_reason.startswith("drained automatically: 3 runs in a row were lost")
    assert "no space left on device" in host.admin_reason  # the last cause
    # An admin sees why, over REST (and so in `headway host list`).
    admin = APIClient()
    staff = django_user_model.objects.create_user("root", is_staff=True)
    admin.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    listed = {h["name"]: h for h in admin.get("/api/v1/hosts/").json()["hosts"]}
    assert listed["flaky"]["state"] == "draining"
    assert listed["flaky"]["reason"] == host.admin_reason
    # Enable puts it back in service, its count begun again.
    assert admin.post("/api/v1/hosts/flaky/enable/").json()["reason"] == ""
    host = _host("flaky")
    assert (host.admin_state, host.admin_reason, host.failed_starts) == ("enabled", "", 0)


def test_a_run_that_starts_on_the_host_resets_its_count(lose_on):
    register_host("flaky", 10)
    lose_on("flaky")
    lose_on("flaky")
    lose_on("flaky", start=True)  # its ranks started: the host works
    assert _host("flaky").failed_starts == 0
    lose_on("flaky")
    lose_on("flaky")
    assert _host("flaky").admin_state == HostAdminState.ENABLED


def test_zero_never_drains_and_an_admin_s_own_state_is_kept(lose_on, settings):
    settings.HEADWAY_HOST_MAX_FAILED_STARTS = 0
    register_host("flaky", 10)
    for _ in range(4):
        lose_on("flaky")
    assert _host("flaky").admin_state == HostAdminState.ENABLED
    settings.HEADWAY_HOST_MAX_FAILED_STARTS = 1
    WorkerHost.objects.filter(name="flaky").update(admin_state=HostAdminState.DISABLED)
    assert not lifecycle_drained("flaky")


def lifecycle_drained(name: str) -> bool:
    """Count one more failed start on ``name`` directly; whether that drained it."""
    from registry.lifecycle._host_health import host_failed_start

    return host_failed_start(_host(name).id, "a cause", trial_id=0, run_id=0)
