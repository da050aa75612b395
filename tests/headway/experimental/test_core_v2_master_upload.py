"""Checkpoints of an unmanaged run sent through the master (``Config(checkpoint_upload=
"master")``, ``PUT unmanaged/trials/{id}/runs/{run}/checkpoints/{storage_id}/files/``), against
a live registry: stored in the admin's location, registered, downloaded and restored; refused
for another user, a bad path and an oversized file; a retried file stored once."""

from __future__ import annotations

import pathlib
import uuid

import pytest
import requests

from headway.experimental import core_v2
from headway.storage import SharedFSStorageManager
from headway.storage._master import MasterStorageManager
from registry.models import Checkpoint, Experiment, State, Trial
from registry.storage_endpoints import registry_storage_manager

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _closed(transactional_db, live_server):
    yield
    core_v2.close()


def _location(trial_id: int) -> SharedFSStorageManager:
    """The admin's storage location of the trial, as the registry builds it."""
    experiment = Experiment.objects.get(trials__id=trial_id)
    manager = registry_storage_manager(experiment.config["checkpoint_storage"])
    assert isinstance(manager, SharedFSStorageManager)
    return manager


def _put(live_server, token: str, route: str, path: str, body: bytes) -> requests.Response:
    return requests.put(
        f"{live_server.url}/api/v1/{route}",
        params={"path": path},
        data=body,
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )


def test_a_checkpoint_through_the_master_is_stored_registered_and_restored(
    unmanaged_client, tmp_path: pathlib.Path
) -> None:
    config = core_v2.Config(
        name="via-master",
        checkpoint_upload="master",
        external_experiment_id="via-master",
        external_trial_id="t",
    )
    core_v2.init(config=config, client=unmanaged_client)
    assert core_v2.info is not None and core_v2.checkpoint is not None
    trial_id = core_v2.info.trial.trial_id
    assert isinstance(core_v2.checkpoint.storage_manager, MasterStorageManager)
    with core_v2.checkpoint.store_path({"steps_completed": 2}) as (path, storage_id):
        (path / "sub").mkdir()
        (path / "sub" / "weights.bin").write_bytes(b"w" * 3000)
        (path / "state").write_text("2")
    source = tmp_path / "upload"
    source.mkdir()
    (source / "model.pt").write_bytes(b"m" * 10)
    uploaded = core_v2.checkpoint.upload(source, {"steps_completed": 3})
    checkpoint = Checkpoint.objects.get(uuid=storage_id)
    assert checkpoint.trial_id == trial_id and checkpoint.steps_completed == 2
    assert checkpoint.resources["sub/weights.bin"] == 3000
    # The files are in the admin's location, with the marker naming the trial.
    location = _location(trial_id)
    stored = location.list_files(storage_id)
    assert stored["sub/weights.bin"] == 3000 and stored["state"] == 1
    assert set(stored) == set(checkpoint.resources)
    assert location.read_marker(storage_id) == {
        "headway_checkpoint": storage_id,
        "trial_id": trial_id,
    }
    assert location.list_files(uploaded)["model.pt"] == 10
    # Read back through the master: restore_path, download, metadata.
    with core_v2.checkpoint.restore_path(storage_id) as restored:
        assert (restored / "sub" / "weights.bin").read_bytes() == b"w" * 3000
        assert (restored / "state").read_text() == "2"
    core_v2.checkpoint.download(uploaded, tmp_path / "copy")
    assert (tmp_path / "copy" / "model.pt").read_bytes() == b"m" * 10
    assert core_v2.checkpoint.get_metadata(storage_id)["steps_completed"] == 2
    core_v2.close()
    assert Trial.objects.get(id=trial_id).state == State.COMPLETED
    # A rerun of the trial resumes from its latest checkpoint, read through the master.
    core_v2.init(config=config, client=unmanaged_client)
    assert core_v2.info is not None and core_v2.checkpoint is not None
    latest = core_v2.info.latest_checkpoint
    assert latest == uploaded
    with core_v2.checkpoint.restore_path(latest) as restored:
        assert (restored / "model.pt").read_bytes() == b"m" * 10


def test_the_route_refuses_others_bad_paths_and_large_files_and_stores_a_retry_once(
    unmanaged_client, live_server, django_user_model, settings
) -> None:
    from rest_framework.authtoken.models import Token

    core_v2.init(config=core_v2.Config(checkpoint_upload="master"), client=unmanaged_client)
    assert core_v2.info is not None
    info = core_v2.info
    trial_id, run_id, token = info.trial.trial_id, info.trial.run_id, info.token
    storage_id = str(uuid.uuid4())
    route = f"unmanaged/trials/{trial_id}/runs/{run_id}/checkpoints/{storage_id}/files/"
    # A retried upload of one path is one file, holding the last body.
    for body in (b"first", b"second!"):
        answer = _put(live_server, token, route, "dir/model.pt", body)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"path": "dir/model.pt", "size": len(body)}
    location = _location(trial_id)
    assert location.list_files(storage_id) == {"dir/model.pt": 7}
    assert (location.base_path / storage_id / "dir" / "model.pt").read_bytes() == b"second!"
    # The owner's token may send too; another user's may not.
    assert _put(live_server, unmanaged_client.session.token, route, "b", b"x").status_code == 200
    bob = django_user_model.objects.create_user("bob", password="bob-password")
    refused = _put(live_server, Token.objects.create(user=bob).key, route, "c", b"x")
    assert refused.status_code == 403
    # Paths are checked as checkpoint resources are: 400 naming the field.
    for bad in ("../escape", "/abs", "a//b", "./a", "a/", ".headway-checkpoint.json", ""):
        answer = _put(live_server, token, route, bad, b"x")
        assert answer.status_code == 400, bad
        assert "path" in answer.json()["errors"], bad
    bad_id = f"unmanaged/trials/{trial_id}/runs/{run_id}/checkpoints/..x/files/"
    assert "storage_id" in _put(live_server, token, bad_id, "a", b"x").json()["errors"]
    # Over the cap: 413, nothing stored.
    settings.HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES = 10
    answer = _put(live_server, token, route, "big.bin", b"y" * 11)
    assert answer.status_code == 413 and "body" in answer.json()["errors"]
    assert "big.bin" not in location.list_files(storage_id)
    assert set(location.list_files(storage_id)) == {"dir/model.pt", "b"}
    # Registered: the files no longer change.
    core_v2_session = requests.post(
        f"{live_server.url}/api/v1/trials/{trial_id}/checkpoints/",
        json={"uuid": storage_id, "steps_completed": 1, "resources": {"dir/model.pt": 7, "b": 1}},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    assert core_v2_session.status_code in (200, 201), core_v2_session.text
    assert _put(live_server, token, route, "b", b"z").status_code == 409


def test_an_unknown_checkpoint_upload_is_refused_naming_the_field(unmanaged_client) -> None:
    with pytest.raises(ValueError, match="checkpoint_upload"):
        core_v2.init(config=core_v2.Config(checkpoint_upload="ftp"), client=unmanaged_client)
