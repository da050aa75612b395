"""Adding metadata to a stored checkpoint: ``POST checkpoints/{uuid}/metadata/``, the
experimental client's ``Checkpoint.add_metadata`` and the Core API's ``checkpoint.set_metadata``."""

from __future__ import annotations

import json
import pathlib
import uuid

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from headway import core
from headway.client import BadRequestError
from headway.experimental import client
from registry.models import Checkpoint
from tests.helpers import register_checkpoint
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

pytestmark = pytest.mark.django_db


@pytest.fixture
def checkpoint(trial):
    return register_checkpoint(trial, steps_completed=10)


def _post(api, uuid_: object, body: object):
    return api.post(f"/api/v1/checkpoints/{uuid_}/metadata/", body, format="json")


def test_the_owner_adds_keys_and_replaces_existing_ones(api, checkpoint) -> None:
    first = _post(api, checkpoint.uuid, {"metadata": {"dataset": "digits", "tags": ["a"]}})
    assert first.status_code == 200, first.content
    assert first.json()["metadata"] == {"steps_completed": 10, "dataset": "digits", "tags": ["a"]}
    second = _post(api, checkpoint.uuid, {"metadata": {"dataset": "digits-v2", "n": 3}})
    assert second.json()["metadata"] == {
        "steps_completed": 10,
        "dataset": "digits-v2",
        "tags": ["a"],
        "n": 3,
    }
    body = api.get(f"/api/v1/checkpoints/{checkpoint.uuid}/").json()
    assert body["metadata"]["dataset"] == "digits-v2" and body["metadata"]["n"] == 3
    # The same steps_completed is accepted (a script re-sending what it stored).
    assert _post(api, checkpoint.uuid, {"metadata": {"steps_completed": 10}}).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "metadata"),
        ({"metadata": {}}, "metadata"),
        ({"metadata": [1, 2]}, "metadata"),
        ({"metadata": "text"}, "metadata"),
        ({"metadata": {"steps_completed": 11}}, "metadata.steps_completed"),
    ],
)
def test_bad_metadata_is_a_400_naming_the_field(api, checkpoint, body, field) -> None:
    response = _post(api, checkpoint.uuid, body)
    assert response.status_code == 400, response.content
    assert field in json.dumps(response.json())
    assert Checkpoint.objects.get(uuid=checkpoint.uuid).metadata == {"steps_completed": 10}


def test_metadata_growing_past_the_limit_is_a_413_naming_it(api, checkpoint, settings) -> None:
    settings.HEADWAY_MAX_CHECKPOINT_METADATA_BYTES = 1000
    assert _post(api, checkpoint.uuid, {"metadata": {"a": "x" * 500}}).status_code == 200
    # Each addition fits; the merged metadata would not.
    response = _post(api, checkpoint.uuid, {"metadata": {"b": "x" * 500}})
    assert response.status_code == 413, response.content
    body = response.json()
    assert "HEADWAY_MAX_CHECKPOINT_METADATA_BYTES" in body["errors"]["metadata"][0]
    assert set(Checkpoint.objects.get(uuid=checkpoint.uuid).metadata) == {"steps_completed", "a"}


def test_nan_metadata_is_a_400_not_a_500(api, checkpoint) -> None:
    response = api.post(
        f"/api/v1/checkpoints/{checkpoint.uuid}/metadata/",
        '{"metadata": {"loss": NaN}}',
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "metadata" in json.dumps(response.json())
    assert Checkpoint.objects.get(uuid=checkpoint.uuid).metadata == {"steps_completed": 10}


def test_unknown_checkpoint_is_404(api) -> None:
    assert _post(api, uuid.uuid4(), {"metadata": {"a": 1}}).status_code == 404


def test_other_users_are_refused(checkpoint, django_user_model) -> None:
    """(Run tokens: the authorization matrix allows only the checkpoint's own trial's run.)"""
    other = django_user_model.objects.create_user("mallory", password="pw")
    as_other = APIClient()
    as_other.force_authenticate(other, Token.objects.create(user=other))
    assert _post(as_other, checkpoint.uuid, {"metadata": {"a": 1}}).status_code == 403
    assert Checkpoint.objects.get(uuid=checkpoint.uuid).metadata == {"steps_completed": 10}


def test_the_route_is_in_the_openapi_schema(api) -> None:
    schema = api.get("/api/v1/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/checkpoints/{uuid}/metadata/"]["post"]
    assert "requestBody" in operation


@pytest.mark.django_db(transaction=True)
def test_experimental_client_add_metadata(api, live_server, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_TOKEN", raising=False)
    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path / "storage")})
    metadata = {"steps_completed": 5, "a": 1}
    files = {"model.pt": b"w", "metadata.json": json.dumps(metadata).encode()}
    stored = store_over_rest(api, trial, files, 5, metadata)
    client.login(master=live_server.url, user="alice", password="alice-password")
    ckpt = client.get_checkpoint(stored)
    ckpt.add_metadata({"a": 2, "note": "best so far"})
    assert ckpt.metadata == {"steps_completed": 5, "a": 2, "note": "best so far"}
    assert client.get_checkpoint(stored).metadata == ckpt.metadata
    with pytest.raises(BadRequestError, match="steps_completed"):
        ckpt.add_metadata({"steps_completed": 6})
    with pytest.raises(TypeError, match="dict"):
        ckpt.add_metadata([("a", 1)])  # type: ignore[arg-type]
    # metadata.json in storage keeps what was stored (as in Determined).
    stored_json = json.loads((tmp_path / "storage" / stored / "metadata.json").read_text())
    assert stored_json == metadata


def test_core_set_metadata_locally_rewrites_metadata_json(tmp_path: pathlib.Path) -> None:
    with core.init(checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 4, "x": 1}) as (path, storage_id):
            (path / "w").write_bytes(b"1")
        merged = ctx.checkpoint.set_metadata(storage_id, {"x": 2, "y": "z"})
        assert merged == {"steps_completed": 4, "x": 2, "y": "z"}
        assert ctx.checkpoint.get_metadata(storage_id) == merged
        with pytest.raises(ValueError, match="steps_completed"):
            ctx.checkpoint.set_metadata(storage_id, {"steps_completed": 5})
        with pytest.raises(TypeError, match="bad"):
            ctx.checkpoint.set_metadata(storage_id, {"bad": object()})
        with pytest.raises(FileNotFoundError):
            ctx.checkpoint.set_metadata(str(uuid.uuid4()), {"x": 3})
