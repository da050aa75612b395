"""REST API of the model registry: ``models/`` and ``models/{name}/versions/`` (CRUD, filters,
permissions, validation, version numbering, checkpoint protection)."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection
from django.db.models import ProtectedError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry import model_registry
from registry.models import Checkpoint, CheckpointState, ModelVersion, RegisteredModel, TrialRun
from tests.helpers import register_checkpoint, require

pytestmark = pytest.mark.django_db


def _client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def bob(django_user_model) -> APIClient:
    return _client_for(django_user_model.objects.create_user("bob", password="pw-bob"))


@pytest.fixture
def admin(django_user_model) -> APIClient:
    return _client_for(
        django_user_model.objects.create_user("root", password="pw-root", is_staff=True)
    )


@pytest.fixture
def ckpt(trial) -> Checkpoint:
    return register_checkpoint(trial, steps_completed=30, size=1234)


def _create(api, name="resnet", **extra):
    return api.post("/api/v1/models/", {"name": name, **extra}, format="json")


def test_it_creates_lists_and_describes_models(api, bob) -> None:
    answer = _create(api, "resnet", description="image model", labels=["prod"])
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert body["name"] == "resnet" and body["owner"] == "alice"
    assert body["labels"] == ["prod"] and body["num_versions"] == 0
    assert body["latest_version"] is None and body["archived"] is False
    assert _create(api, "bert-v1.0_small").status_code == 201
    # Everyone logged in reads every model.
    names = [m["name"] for m in bob.get("/api/v1/models/").json()["results"]]
    assert names == ["bert-v1.0_small", "resnet"]
    assert bob.get("/api/v1/models/bert-v1.0_small/").json()["name"] == "bert-v1.0_small"
    assert bob.get("/api/v1/models/nope/").status_code == 404


def test_list_filters_by_name_label_and_archived(api) -> None:
    _create(api, "resnet", labels=["prod", "vision"])
    _create(api, "ResNet-small", labels=["vision"])
    _create(api, "bert", labels=["prod"])
    api.patch("/api/v1/models/bert/", {"archived": True}, format="json")

    def names(**params):
        answer = api.get("/api/v1/models/", params)
        assert answer.status_code == 200, answer.json()
        return [m["name"] for m in answer.json()["results"]]

    assert names(name="resnet") == ["ResNet-small", "resnet"]
    assert names(label="prod") == ["bert", "resnet"]
    assert names(label="pro") == []
    assert names(archived="true") == ["bert"]
    assert names(archived="false", label="vision") == ["ResNet-small", "resnet"]
    bad = api.get("/api/v1/models/", {"archived": "maybe"})
    assert bad.status_code == 400 and "archived" in bad.json()["errors"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "a" * 257}, "name"),
        ({"name": "has space"}, "name"),
        ({"name": "a/b"}, "name"),
        ({"name": ".hidden"}, "name"),
        ({"name": 7}, "name"),
        ({"name": "ok", "labels": "prod"}, "labels"),
        ({"name": "ok", "labels": [""]}, "labels.0"),
        ({"name": "ok", "metadata": [1]}, "metadata"),
        ({"name": "ok", "colour": "red"}, "colour"),
    ],
)
def test_create_refuses_bad_input_naming_the_field(api, body, field) -> None:
    answer = api.post("/api/v1/models/", body, format="json")
    assert answer.status_code == 400, answer.json()
    assert field in answer.json()["errors"], answer.json()
    assert not RegisteredModel.objects.exists()


def test_a_duplicate_name_is_a_409_naming_name(api, bob) -> None:
    assert _create(api, "resnet").status_code == 201
    answer = _create(bob, "resnet")
    assert answer.status_code == 409
    assert "name" in answer.json()["errors"] and "already exists" in answer.json()["detail"]


def test_only_the_owner_or_staff_may_change_a_model(api, bob, admin, ckpt) -> None:
    _create(api, "resnet")
    url = "/api/v1/models/resnet/"
    denied = bob.patch(url, {"description": "mine now"}, format="json")
    assert denied.status_code == 403 and "alice" in denied.json()["detail"]
    assert bob.delete(url).status_code == 403
    body = {"checkpoint_uuid": str(ckpt.uuid)}
    assert bob.post(url + "versions/", body, format="json").status_code == 403
    assert api.post(url + "versions/", body, format="json").status_code == 201
    assert bob.patch(url + "versions/1/", {"comment": "x"}, format="json").status_code == 403
    assert bob.delete(url + "versions/1/").status_code == 403
    assert bob.get(url + "versions/1/").status_code == 200
    patched = admin.patch(url, {"description": "by admin", "labels": ["a"]}, format="json")
    assert patched.status_code == 200 and patched.json()["description"] == "by admin"
    assert RegisteredModel.objects.get(name="resnet").description == "by admin"


def test_anonymous_requests_are_401(api, client) -> None:
    _create(api, "resnet")
    anonymous = APIClient()
    assert anonymous.get("/api/v1/models/").status_code == 401
    assert anonymous.get("/api/v1/models/resnet/versions/").status_code == 401
    assert anonymous.post("/api/v1/models/", {"name": "x"}, format="json").status_code == 401


def test_trial_tokens_read_but_never_write(api, trial, ckpt) -> None:
    _create(api, "resnet")
    api.post("/api/v1/models/resnet/versions/", {"checkpoint_uuid": str(ckpt.uuid)}, format="json")
    run = TrialRun.objects.get(trial=trial)
    as_trial = APIClient()
    as_trial.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    assert as_trial.get("/api/v1/models/resnet/").status_code == 200
    assert as_trial.get("/api/v1/models/resnet/versions/1/").status_code == 200
    assert as_trial.post("/api/v1/models/", {"name": "x"}, format="json").status_code == 403
    assert as_trial.patch("/api/v1/models/resnet/", {}, format="json").status_code == 403
    assert as_trial.delete("/api/v1/models/resnet/versions/1/").status_code == 403


def test_update_replaces_fields_and_refuses_unknown_ones(api) -> None:
    _create(api, "resnet", labels=["a"], metadata={"k": 1})
    answer = api.patch(
        "/api/v1/models/resnet/", {"labels": ["b", "c"], "metadata": {"z": [1]}}, format="json"
    )
    assert answer.status_code == 200
    assert answer.json()["labels"] == ["b", "c"] and answer.json()["metadata"] == {"z": [1]}
    renamed = api.patch("/api/v1/models/resnet/", {"name": "other"}, format="json")
    assert renamed.status_code == 400 and "name" in renamed.json()["errors"]
    bad = api.patch("/api/v1/models/resnet/", {"archived": "perhaps"}, format="json")
    assert bad.status_code == 400 and "archived" in bad.json()["errors"]


def test_versions_are_numbered_and_embed_their_checkpoint(api, trial, ckpt) -> None:
    _create(api, "resnet")
    url = "/api/v1/models/resnet/versions/"
    other = register_checkpoint(trial, steps_completed=40)
    first = api.post(url, {"checkpoint_uuid": str(ckpt.uuid), "comment": "baseline"}, format="json")
    assert first.status_code == 201, first.json()
    body = first.json()
    assert body["version"] == 1 and body["model"] == "resnet" and body["comment"] == "baseline"
    assert body["checkpoint"]["uuid"] == str(ckpt.uuid)
    assert body["checkpoint"]["trial_id"] == trial.id
    assert body["checkpoint"]["experiment_id"] == trial.experiment_id
    assert body["checkpoint"]["steps_completed"] == 30 and body["checkpoint"]["size"] == 1234
    assert body["checkpoint"]["state"] == "COMPLETED"
    assert body["download_url"] == f"http://testserver/api/v1/checkpoints/{ckpt.uuid}/download"
    assert api.post(url, {"checkpoint_uuid": str(other.uuid)}, format="json").json()["version"] == 2
    # The same checkpoint may back several versions.
    assert api.post(url, {"checkpoint_uuid": str(ckpt.uuid)}, format="json").json()["version"] == 3
    listed = api.get(url).json()["results"]
    assert [v["version"] for v in listed] == [3, 2, 1]
    model = api.get("/api/v1/models/resnet/").json()
    assert model["num_versions"] == 3 and model["latest_version"] == 3
    patched = api.patch(url + "2/", {"name": "best", "labels": ["prod"]}, format="json")
    assert patched.status_code == 200 and patched.json()["name"] == "best"
    assert api.get(url + "2/").json()["labels"] == ["prod"]
    assert api.get(url + "9/").status_code == 404
    assert api.get("/api/v1/models/nope/versions/").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "checkpoint_uuid"),
        ({"checkpoint_uuid": "not-a-uuid"}, "checkpoint_uuid"),
        ({"checkpoint_uuid": str(uuid.UUID(int=1))}, "checkpoint_uuid"),
        ({"checkpoint_uuid": "CKPT", "version": 5}, "version"),
        ({"checkpoint_uuid": "CKPT", "labels": [3, ""]}, "labels.0"),
    ],
)
def test_register_refuses_bad_input_naming_the_field(api, ckpt, body, field) -> None:
    _create(api, "resnet")
    if body.get("checkpoint_uuid") == "CKPT":
        body = {**body, "checkpoint_uuid": str(ckpt.uuid)}
    answer = api.post("/api/v1/models/resnet/versions/", body, format="json")
    assert answer.status_code == 400, answer.json()
    assert field in answer.json()["errors"], answer.json()
    assert not ModelVersion.objects.exists()


@pytest.mark.parametrize("state", [CheckpointState.DELETING, CheckpointState.DELETED])
def test_a_checkpoint_being_deleted_or_deleted_cannot_be_registered(api, ckpt, state) -> None:
    _create(api, "resnet")
    Checkpoint.objects.filter(uuid=ckpt.uuid).update(state=state)
    answer = api.post(
        "/api/v1/models/resnet/versions/", {"checkpoint_uuid": str(ckpt.uuid)}, format="json"
    )
    assert answer.status_code == 400
    assert state in answer.json()["errors"]["checkpoint_uuid"][0]


def test_an_archived_model_takes_no_new_versions(api, ckpt) -> None:
    _create(api, "resnet")
    api.patch("/api/v1/models/resnet/", {"archived": True}, format="json")
    body = {"checkpoint_uuid": str(ckpt.uuid)}
    answer = api.post("/api/v1/models/resnet/versions/", body, format="json")
    assert answer.status_code == 409 and "archived" in answer.json()["detail"]
    api.patch("/api/v1/models/resnet/", {"archived": False}, format="json")
    assert api.post("/api/v1/models/resnet/versions/", body, format="json").status_code == 201


def test_a_version_protects_its_checkpoint_until_deleted(api, ckpt) -> None:
    _create(api, "resnet")
    url = "/api/v1/models/resnet/versions/"
    api.post(url, {"checkpoint_uuid": str(ckpt.uuid)}, format="json")
    api.post(url, {"checkpoint_uuid": str(ckpt.uuid)}, format="json")
    # What retention and the DELETE endpoints query.
    assert ckpt.model_versions.count() == 2
    with pytest.raises(ProtectedError):
        Checkpoint.objects.get(uuid=ckpt.uuid).delete()
    assert api.delete(url + "2/").status_code == 204
    assert list(ckpt.model_versions.values_list("version", flat=True)) == [1]
    # The next registration takes the highest number plus one (Determined's rule).
    assert api.post(url, {"checkpoint_uuid": str(ckpt.uuid)}, format="json").json()["version"] == 2
    # Deleting the model deletes its versions and frees the checkpoint.
    assert api.delete("/api/v1/models/resnet/").status_code == 204
    assert not RegisteredModel.objects.exists() and ckpt.model_versions.count() == 0
    assert api.get("/api/v1/models/resnet/").status_code == 404


def test_the_schema_documents_the_model_routes(api) -> None:
    answer = api.get("/api/v1/schema/")
    assert answer.status_code == 200
    assert b"/api/v1/models/{name}/" in answer.content
    assert b"/api/v1/models/{model_name}/versions/{version}/" in answer.content


@pytest.mark.django_db(transaction=True)
def test_concurrent_registrations_get_distinct_numbers(django_user_model) -> None:
    """Threads register into one model at once; each gets its own number, 1..n (PostgreSQL:
    SQLite serialises writers anyway, so the race needs row locks only there)."""
    require(connection.vendor == "postgresql", "row-lock race test needs PostgreSQL")
    from registry.lifecycle import experiment_create
    from tests.helpers import TINY_CONFIG, TINY_MODEL

    owner = django_user_model.objects.create_user("racer", password="pw")
    experiment = experiment_create(
        owner=owner, config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    trial = experiment.trials.get()
    # 8 threads: with the test's own connection they stay below the connection pool's 16
    # (HEADWAY_DB_POOL_MAX_SIZE); a 17th waiter never reached the barrier and the test hung.
    checkpoints = [register_checkpoint(trial, steps_completed=10 * i) for i in range(1, 9)]
    model = model_registry.model_create(owner=owner, name="raced")
    barrier = threading.Barrier(len(checkpoints))
    errors: list[BaseException] = []

    def register(ckpt: Checkpoint) -> None:
        try:
            connection.ensure_connection()  # connect first, so the registrations overlap
            barrier.wait()
            model_registry.version_register(model=model, user=owner, checkpoint_uuid=ckpt.uuid)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=register, args=(c,)) for c in checkpoints]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    numbers = sorted(ModelVersion.objects.filter(model=model).values_list("version", flat=True))
    assert numbers == list(range(1, len(checkpoints) + 1))
