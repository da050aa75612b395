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
    assert "Username: Ensure this value has at most 150 characters" in response.content.decode()


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


# --- a trial with 10,000 metric series ------------------------------------------------------------


def report_series(client, trial, count: int) -> None:
    """Report ``count`` training series (1,000 per report, the per-report limit) and one
    validation series, the searcher metric, through the metrics route."""
    reports = [
        {
            "group": "training",
            "steps_completed": step + 1,
            "metrics": {
                f"m{step * 1000 + i:05d}": 1.0 for i in range(min(1000, count - step * 1000))
            },
        }
        for step in range(-(-count // 1000))
    ]
    reports.append(
        {"group": "validation", "steps_completed": 1, "metrics": {"validation_loss": 0.5}}
    )
    response = client.post(
        f"/api/v1/trials/{trial.id}/metrics/", {"reports": reports}, format="json"
    )
    assert response.status_code == 200, response.content[:300]


def test_a_trial_with_10000_series_answers_a_bounded_summary_and_pages_the_rest(api, trial):
    report_series(run_client(trial), trial, 9_999)  # and validation_loss: 10,000 series
    response = api.get(f"/api/v1/trials/{trial.id}/")
    assert response.status_code == 200
    body = response.json()
    assert body["summary_metrics_count"] == 10_000
    embedded = [(g, n) for g, by_name in body["summary_metrics"].items() for n in by_name]
    assert len(embedded) == 100
    assert ("validation", "validation_loss") in embedded  # the searcher metric comes first
    assert len(response.content) < 30_000  # was 0.6 MB
    # The experiment's trial list embeds as much.
    listed = api.get(f"/api/v1/experiments/{trial.experiment_id}/trials/").json()["results"]
    assert len(listed[0]["summary_metrics"]["training"]) == 99
    # Every series is reachable, a page at a time, in group then name order.
    seen = []
    url = f"/api/v1/trials/{trial.id}/summary-metrics/?limit=1000"
    while url:
        page = api.get(url).json()
        assert page["count"] == 10_000
        seen += [(row["group"], row["name"]) for row in page["results"]]
        url = page["next"]
    assert len(seen) == 10_000 and seen == sorted(seen)
    assert seen[-1] == ("validation", "validation_loss")
    first = api.get(f"/api/v1/trials/{trial.id}/summary-metrics/?limit=1").json()["results"][0]
    assert first == {
        "group": "training",
        "name": "m00000",
        "last": 1.0,
        "last_step": 1,
        "min": 1.0,
        "max": 1.0,
        "count": 1,
    }


def test_a_trial_with_few_series_embeds_them_all(api, trial):
    report_series(run_client(trial), trial, 3)
    body = api.get(f"/api/v1/trials/{trial.id}/").json()
    assert body["summary_metrics_count"] == 4
    assert set(body["summary_metrics"]["training"]) == {"m00000", "m00001", "m00002"}


def test_the_summary_route_refuses_a_bad_limit_naming_it(api, trial):
    response = api.get(f"/api/v1/trials/{trial.id}/summary-metrics/?limit=0")
    assert response.status_code == 400
    assert "limit" in response.json()["errors"]


def test_an_unmanaged_run_s_hparams_over_the_config_limit_are_a_413_naming_them(api, settings):
    settings.HEADWAY_MAX_CONFIG_BYTES = 1000
    body = {"config": {"name": "u"}, "hparams": {"blob": "x" * 1000}}
    response = api.post("/api/v1/unmanaged/", body, format="json")
    assert response.status_code == 413, response.content[:300]
    assert "HEADWAY_MAX_CONFIG_BYTES" in response.json()["errors"]["hparams"][0]
    body["hparams"] = {"lr": 0.1}
    assert api.post("/api/v1/unmanaged/", body, format="json").status_code in (200, 201)


def test_a_checkpoint_file_path_over_1024_characters_is_400_naming_resources(trial):
    client = run_client(trial)
    body = register_body({}) | {"resources": {"a/" * 600 + "x": 1}}
    response = client.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "at most 1024" in response.json()["errors"]["resources"][0]


def test_an_unmanaged_run_s_checkpoint_metadata_over_the_limit_is_a_413(api):
    started = api.post("/api/v1/unmanaged/", {"config": {"name": "u"}}, format="json").json()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {started['token']}")
    body = register_body({"blob": "x" * (64 * 1024)})
    url = f"/api/v1/trials/{started['trial_id']}/checkpoints/"
    response = client.post(url, body, format="json")
    assert response.status_code == 413, response.content[:300]
    assert "metadata" in response.json()["errors"]
