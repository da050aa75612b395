"""Component health: ``GET /api/v1/health/``, ``/healthz`` and the Workers page's block.

Real parts: the test database (SQLite, or PostgreSQL with ``DATABASE_URL``), the broker the
settings name (the filesystem broker, or Redis with ``REDIS_URL``), real folders and moto's S3
server. A broker that is down is a Redis URL on a port nothing listens on.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import boto3
import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from config.storage_locations import StorageLocation, StorageLocations
from registry.health import MASTER_WORKER, master_worker_limit, record_beat
from registry.models import ComponentBeat
from tests.helpers import free_port, wait_for

URL = "/api/v1/health/"


@pytest.fixture
def up(settings, tmp_path):
    """Everything up: the master worker beat just now, one shared_fs location that exists."""
    root = tmp_path / "checkpoints"
    root.mkdir()
    settings.HEADWAY_STORAGE_LOCATIONS = StorageLocations(
        {"shared": StorageLocation("shared", "shared_fs", host_path=str(root))}, "shared"
    )
    record_beat()
    return root


def _by_name(body: dict) -> dict[str, dict]:
    return {c["name"]: c for c in body["components"]}


def test_everything_up_answers_200_with_each_component(api, up, settings) -> None:
    response = api.get(URL)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok" and body["down"] == []
    components = _by_name(body)
    assert list(components) == ["database", "broker", "master_worker", "storage:shared"]
    for component in components.values():
        assert component["status"] == "ok", component
        assert component["detail"]
        datetime.fromisoformat(component["checked_at"])
    assert connection.vendor in components["database"]["detail"]
    broker = "redis at" if settings.REDIS_URL else "filesystem broker"
    assert broker in components["broker"]["detail"]
    assert components["master_worker"]["last_beat_at"] is not None
    assert str(up) in components["storage:shared"]["detail"]
    assert not any(up.iterdir())  # the marker is removed


def test_broker_down_is_503_naming_it(api, up, settings) -> None:
    port = free_port()
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    response = api.get(URL)
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    body = response.json()
    assert body["status"] == "down" and body["down"] == ["broker"]
    broker = _by_name(body)["broker"]
    assert broker["status"] == "down" and f"127.0.0.1:{port}" in broker["detail"]


def test_missing_storage_location_is_503_and_not_created(api, up, settings, tmp_path) -> None:
    gone = tmp_path / "not-mounted"
    settings.HEADWAY_STORAGE_LOCATIONS = StorageLocations(
        {
            "shared": StorageLocation("shared", "shared_fs", host_path=str(up)),
            "gone": StorageLocation("gone", "shared_fs", host_path=str(gone)),
        },
        "shared",
    )
    response = api.get(URL)
    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["storage:gone"]
    assert "missing" in _by_name(body)["storage:gone"]["detail"]
    assert not gone.exists()  # an admin's root may be a mount: never created by the check


def test_embedded_default_location_is_created(api, settings, tmp_path) -> None:
    settings.HEADWAY_STORAGE_LOCATIONS = None
    settings.HEADWAY_CHECKPOINT_DIR = tmp_path / "var" / "checkpoints"
    record_beat()
    response = api.get(URL)
    assert response.status_code == 200, response.content
    assert _by_name(response.json())["storage:default"]["status"] == "ok"
    assert settings.HEADWAY_CHECKPOINT_DIR.is_dir()


def test_s3_location_checked_with_head_bucket(api, up, settings, s3_endpoint) -> None:
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="health-there")
    settings.HEADWAY_STORAGE_LOCATIONS = StorageLocations(
        {
            "there": StorageLocation(
                "there", "s3", bucket="health-there", endpoint_url=s3_endpoint
            ),
            "absent": StorageLocation(
                "absent", "s3", bucket="health-absent", endpoint_url=s3_endpoint
            ),
        },
        "there",
    )
    response = api.get(URL)
    assert response.status_code == 503
    components = _by_name(response.json())
    assert components["storage:there"]["status"] == "ok"
    assert components["storage:absent"]["status"] == "down"
    assert "404" in components["storage:absent"]["detail"]


def test_master_worker_without_beat_or_with_a_stale_one_is_down(api, up) -> None:
    ComponentBeat.objects.all().delete()
    body = api.get(URL).json()
    assert body["down"] == [MASTER_WORKER]
    assert "no reaper pass" in _by_name(body)[MASTER_WORKER]["detail"]

    stale = timezone.now() - timedelta(seconds=2 * master_worker_limit())
    record_beat(at=stale)
    response = api.get(URL)
    assert response.status_code == 503
    master = _by_name(response.json())[MASTER_WORKER]
    assert master["status"] == "down"
    assert datetime.fromisoformat(master["last_beat_at"]) == stale


def test_the_reaper_pass_records_the_master_worker_beat(db) -> None:
    from registry.tasks import reap_lost_runs

    ComponentBeat.objects.all().delete()
    reap_lost_runs()
    assert ComponentBeat.objects.get(name=MASTER_WORKER).beat_at <= timezone.now()


def test_health_needs_a_login(db, up, trial) -> None:
    assert APIClient().get(URL).status_code == 401
    run_token = APIClient()
    run_token.credentials(HTTP_AUTHORIZATION=f"Token {trial.runs.get().token}")
    assert run_token.get(URL).status_code == 403


def test_healthz_is_open_and_only_needs_the_database(db, settings) -> None:
    """A load balancer keeps a web server whose database answers, even with the broker and the
    master worker down (docs/decisions/operations.md)."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    ComponentBeat.objects.all().delete()
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_workers_page_shows_component_health(client, django_user_model, up, settings) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    client.force_login(django_user_model.objects.create_user("bob", password="bob-password"))
    page = client.get("/workers/").content.decode()
    assert 'id="component-health"' in page
    assert "1 down" in page
    for name in ("database", "broker", "master_worker", "storage:shared"):
        assert f"<strong>{name}</strong>" in page


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL (a real Redis)")
def test_redis_broker_up(api, up, settings) -> None:
    settings.REDIS_URL = os.environ["REDIS_URL"]
    response = api.get(URL)
    assert response.status_code == 200, response.content
    assert "answered PING" in _by_name(response.json())["broker"]["detail"]


@pytest.mark.integration
def test_a_real_master_worker_beats_and_health_says_so(cluster, cluster_token) -> None:
    """The cluster fixture's master worker (Celery with its embedded beat, on Redis) records
    its reaper passes; the live server's health then reports it, and the broker, ok."""
    import requests

    session = requests.Session()
    session.headers["Authorization"] = f"Token {cluster_token}"

    def components() -> dict[str, dict]:
        return _by_name(session.get(f"{cluster.url}{URL}", timeout=30).json())

    wait_for(lambda: components()[MASTER_WORKER]["status"] == "ok", 90, "the master worker's beat")
    found = components()
    assert found["broker"]["status"] == "ok" and "answered PING" in found["broker"]["detail"]
    assert found["database"]["status"] == "ok"
