"""Hardening: free-form input accepted from run tokens, host tokens and anonymous clients is
bounded, and each bound is answered as a JSON 4xx naming the field (never a 500 or a row that
grows without limit). Runs on the suite's database (PostgreSQL in CI)."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from tests.helpers import TINY_CONFIG, create_experiment, start_run

pytestmark = pytest.mark.django_db

LONG_USERNAME = "u" * 300
HOST_BEAT = "/api/v1/host-agent/heartbeat/"


def run_client(trial) -> APIClient:
    """A client holding the trial's running run's token (what the trial process holds)."""
    run = start_run(trial)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    return client


# --- usernames over the columns' length -------------------------------------------------------


def test_api_login_with_a_300_character_username_is_400_naming_it(client):
    response = client.post(
        "/api/v1/auth/login/",
        {"username": LONG_USERNAME, "password": "x"},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content[:300]
    assert "username" in response.json()["errors"]


def test_dashboard_login_with_a_300_character_username_is_refused_naming_it(client):
    response = client.post("/accounts/login/", {"username": LONG_USERNAME, "password": "x"})
    assert response.status_code == 200  # the form again, with its error
    assert "username" in response.context["form"].errors


def test_admin_login_with_a_300_character_username_is_refused_naming_it(client):
    response = client.post("/admin/login/", {"username": LONG_USERNAME, "password": "x"})
    assert response.status_code == 200
    assert "username" in response.context["form"].errors


def test_a_username_at_the_column_length_is_an_ordinary_wrong_login(client):
    response = client.post(
        "/api/v1/auth/login/",
        {"username": "u" * 150, "password": "x"},
        content_type="application/json",
    )
    assert response.status_code == 401


# --- checkpoint metadata ------------------------------------------------------------------------


def register_body(metadata: dict) -> dict:
    return {
        "uuid": str(uuid.uuid4()),
        "steps_completed": 10,
        "resources": {"state-dict.pth": 10},
        "metadata": metadata,
    }


def test_checkpoint_metadata_over_the_limit_is_a_413_naming_it(trial):
    client = run_client(trial)
    too_big = {"blob": "x" * (64 * 1024)}
    response = client.post(
        f"/api/v1/trials/{trial.id}/checkpoints/", register_body(too_big), format="json"
    )
    assert response.status_code == 413, response.content[:300]
    message = response.json()["errors"]["metadata"][0]
    assert "HEADWAY_MAX_CHECKPOINT_METADATA_BYTES" in message and "65536" in message
    assert not trial.checkpoints.exists()


def test_checkpoint_metadata_at_the_limit_is_registered(trial, settings):
    settings.HEADWAY_MAX_CHECKPOINT_METADATA_BYTES = 100
    client = run_client(trial)
    fits = {"k": "x" * (100 - len('{"k": ""}'))}
    url = f"/api/v1/trials/{trial.id}/checkpoints/"
    assert client.post(url, register_body(fits), format="json").status_code == 201
    over = {"k": "x" * (101 - len('{"k": ""}'))}
    assert client.post(url, register_body(over), format="json").status_code == 413


# --- a host token and its host's namespace -----------------------------------------------------


def host_client(name: str) -> APIClient:
    from tests.host_api_helpers import issue_key

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_key(name)}")
    return client


def host_beat_body(**extra) -> dict:
    from django.utils import timezone

    from tests.helpers import _default_pool

    body = {"pool": _default_pool(), "devices": ["cpu0"], "gpu": False}
    return body | {"started_at": timezone.now().isoformat()} | extra


def test_a_host_token_cannot_move_its_host_into_another_namespace(settings):
    from registry.models import WorkerHost

    client = host_client("ns-host")
    mine = settings.CELERY_TASK_DEFAULT_QUEUE
    assert client.post(HOST_BEAT, host_beat_body(), format="json").status_code == 200
    response = client.post(HOST_BEAT, host_beat_body(namespace="other-cluster"), format="json")
    assert response.status_code == 409, response.content[:300]
    assert "other-cluster" in response.json()["errors"]["namespace"][0]
    row = WorkerHost.objects.get(name="ns-host")
    assert (row.namespace, row.queue) == (mine, f"{mine}.host.ns-host")
    # Its own namespace, named or left to the default, keeps being served.
    assert client.post(HOST_BEAT, host_beat_body(namespace=mine), format="json").status_code == 200


def test_a_forgotten_host_registers_in_the_namespace_its_new_token_beats_in(admin_client):
    from registry.models import WorkerHost

    host_client("moved").post(HOST_BEAT, host_beat_body(), format="json")
    assert admin_client.delete("/api/v1/hosts/moved/").status_code in (200, 204)
    client = host_client("moved")
    response = client.post(HOST_BEAT, host_beat_body(namespace="other-cluster"), format="json")
    assert response.status_code == 200, response.content[:300]
    assert WorkerHost.objects.get(name="moved").namespace == "other-cluster"


# --- storage_path -------------------------------------------------------------------------------


def config_with_storage_path(path: str) -> str:
    return TINY_CONFIG + f"checkpoint_storage: {{type: shared_fs, storage_path: {path}}}\n"


@pytest.mark.parametrize(
    "path",
    [
        "/".join(["abcd"] * 1000),  # 4,999 characters
        "a" * 256,  # one folder name longer than filesystems allow
    ],
)
def test_a_long_storage_path_is_400_naming_it(api, path):
    response = create_experiment(api, config=config_with_storage_path(path))
    assert response.status_code == 400, response.content[:300]
    assert "config.checkpoint_storage.storage_path" in response.json()["errors"]


def test_a_storage_path_at_the_limits_is_accepted(api):
    path = "/".join(["a" * 255] * 4)  # 1,023 characters, each folder 255
    response = create_experiment(api, config=config_with_storage_path(path))
    assert response.status_code == 201, response.content[:300]


def test_an_unmanaged_run_s_long_storage_path_is_400_naming_it(api):
    config = {"name": "u", "checkpoint_storage": {"type": "shared_fs", "storage_path": "a/" * 2500}}
    response = api.post("/api/v1/unmanaged/", {"config": config}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert any("storage_path" in field for field in response.json()["errors"])


def test_a_long_host_path_inside_a_location_is_400_naming_it(api, tmp_path):
    # Inside pytest's temporary root, one of the suite's storage locations.
    storage = "{type: shared_fs, host_path: " + str(tmp_path) + "/a" * 2500 + "}"
    response = create_experiment(api, config=TINY_CONFIG + f"checkpoint_storage: {storage}\n")
    assert response.status_code == 400, response.content[:300]
    assert "at most 1024" in response.json()["errors"]["config.checkpoint_storage.host_path"][0]


def test_a_long_s3_prefix_is_400_naming_it(api):
    storage = "{type: s3, bucket: bkt, prefix: " + "a/" * 2500 + "}"
    response = create_experiment(api, config=TINY_CONFIG + f"checkpoint_storage: {storage}\n")
    assert response.status_code == 400, response.content[:300]
    assert "config.checkpoint_storage.prefix" in response.json()["errors"]
