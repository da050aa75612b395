"""``GET /metrics``: who may scrape, and the series for a known cluster state.

The exposition is parsed with prometheus_client's own parser. The state is built through the
lifecycle (runs queued, claimed, lost) and a registered host, as workers would.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from config.storage_locations import StorageLocation, StorageLocations
from registry import lifecycle
from registry.health import record_beat
from tests.helpers import register_host, start_run, submit_single_trial

URL = "/metrics"
SCRAPE_TOKEN = "scrape-" + "s" * 30


@pytest.fixture
def scraper(db, settings, tmp_path) -> APIClient:
    """A client with the scrape token; one existing shared_fs location; the worker beat."""
    settings.HEADWAY_METRICS_TOKEN = SCRAPE_TOKEN
    root = tmp_path / "checkpoints"
    root.mkdir()
    settings.HEADWAY_STORAGE_LOCATIONS = StorageLocations(
        {"shared": StorageLocation("shared", "shared_fs", host_path=str(root))}, "shared"
    )
    record_beat()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {SCRAPE_TOKEN}")
    return client


def _samples(response) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_metrics_are_never_open(scraper, settings, trial) -> None:
    users = get_user_model().objects
    anonymous = APIClient().get(URL)
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.get(URL).status_code == 401
    assert _token_client(users.create_user("carol")).get(URL).status_code == 403
    assert _token_client(users.create_user("root", is_staff=True)).get(URL).status_code == 200
    assert scraper.get(URL).status_code == 200
    run_token = APIClient()
    run_token.credentials(HTTP_AUTHORIZATION=f"Token {trial.runs.get().token}")
    assert run_token.get(URL).status_code == 403
    settings.HEADWAY_METRICS_TOKEN = ""  # no scrape token configured: Bearer is refused
    assert scraper.get(URL).status_code == 401


def test_series_for_a_known_state(scraper, django_user_model) -> None:
    owner = django_user_model.objects.create_user("dave")
    register_host("gpu-a", slots=4, gpu=True)
    lost, waiting = submit_single_trial(owner), submit_single_trial(owner)
    run = start_run(lost)  # claimed by a worker, then its host is lost: re-queued
    lifecycle.trial_run_exited(trial_id=lost.id, run_id=run.run_id, exit_code=None, reason="x")
    assert waiting.runs.get().state == "QUEUED"

    samples = _samples(scraper.get(URL))
    pool = (("pool", "default"),)
    assert samples[("headway_queued_runs", pool)] == 2
    assert samples[("headway_pool_hosts", pool)] == 1
    assert samples[("headway_pool_slots", pool)] == 4
    assert samples[("headway_pool_slots_used", pool)] == 0
    assert samples[("headway_pool_slots_free", pool)] == 4
    assert samples[("headway_runs", (("state", "QUEUED"),))] == 2
    assert samples[("headway_runs", (("state", "RUNNING"),))] == 0
    assert samples[("headway_runs_lost_total", ())] == 1
    host = (("host", "gpu-a"), ("pool", "default"))
    assert samples[("headway_host_slots", host)] == 4
    assert samples[("headway_host_heartbeat_age_seconds", host)] >= 0
    for component in ("database", "broker", "master_worker", "storage:shared"):
        assert samples[("headway_component_up", (("component", component),))] == 1
    assert samples[("headway_master_worker_beat_age_seconds", ())] >= 0


def test_request_series_count_503s_and_latency(scraper, settings) -> None:
    settings.HEADWAY_STORAGE_LOCATIONS = StorageLocations(
        {"gone": StorageLocation("gone", "shared_fs", host_path="/nonexistent/headway")}, "gone"
    )
    key_503 = ("headway_http_responses_total", (("method", "GET"), ("status", "503")))
    key_count = (
        "headway_http_request_duration_seconds_count",
        (("method", "GET"), ("route", "registry-api:health")),
    )
    before = _samples(scraper.get(URL))
    user = get_user_model().objects.create_user("erin")
    assert _token_client(user).get("/api/v1/health/").status_code == 503
    after = _samples(scraper.get(URL))
    assert after[key_503] == before.get(key_503, 0) + 1
    assert after[key_count] == before.get(key_count, 0) + 1
    assert after[("headway_component_up", (("component", "storage:gone"),))] == 0
