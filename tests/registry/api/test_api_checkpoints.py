"""REST: registering checkpoints and downloading them (whole tar or one file) from shared_fs
and from S3 (moto's server mode, a real HTTP endpoint)."""

import io
import tarfile
import uuid

import pytest

from headway.storage import build_storage_manager
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

pytestmark = pytest.mark.django_db

FILES = {"state-dict.pth": b"\x00weights" * 1000, "code/notes.txt": b"hello"}


@pytest.fixture
def stored(api, checkpoint_storage):
    """A trial whose checkpoint's files are in storage and registered over REST."""
    trial = trial_on_storage(api, checkpoint_storage)
    storage_id = store_over_rest(api, trial, FILES, 40)
    manager = build_storage_manager(checkpoint_storage)
    body = {
        "uuid": storage_id,
        "steps_completed": 40,
        "resources": {name: len(data) for name, data in FILES.items()},
        "metadata": {"steps_completed": 40},
    }
    again = api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert again.status_code == 200  # idempotent on uuid
    return trial, storage_id, manager


def test_it_registers_and_lists(api, stored):
    trial, storage_id, _ = stored
    trial.refresh_from_db()
    assert str(trial.latest_checkpoint) == storage_id
    listed = api.get(f"/api/v1/experiments/{trial.experiment_id}/checkpoints/").json()["results"]
    assert [c["uuid"] for c in listed] == [storage_id]
    assert listed[0]["size"] == sum(len(d) for d in FILES.values())


def test_it_streams_a_tar_of_the_checkpoint(api, stored):
    _, storage_id, _ = stored
    response = api.get(f"/api/v1/checkpoints/{storage_id}/download")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(b"".join(response.streaming_content))) as tar:
        assert {m: tar.extractfile(m).read() for m in tar.getnames()} == FILES


def test_it_serves_one_file_and_rejects_others(api, stored):
    _, storage_id, _ = stored
    one = api.get(f"/api/v1/checkpoints/{storage_id}/download", {"path": "code/notes.txt"})
    assert one.status_code == 200 and b"".join(one.streaming_content) == b"hello"
    for bad in ("../secret", "/etc/passwd", "missing.txt"):
        response = api.get(f"/api/v1/checkpoints/{storage_id}/download", {"path": bad})
        assert response.status_code == 400 and "path" in response.json()["errors"]


def test_it_answers_410_when_the_files_are_gone(api, stored):
    _, storage_id, manager = stored
    manager.delete(storage_id)
    response = api.get(f"/api/v1/checkpoints/{storage_id}/download")
    assert response.status_code == 410


def test_it_rejects_a_bad_registration(api, stored):
    trial, _, _ = stored
    response = api.post(
        f"/api/v1/trials/{trial.id}/checkpoints/",
        {"uuid": "nope", "steps_completed": -1, "resources": {"a": "big"}},
        format="json",
    )
    assert response.status_code == 400
    assert {"uuid", "steps_completed", "resources.a"} <= set(response.json()["errors"])


def test_unknown_checkpoint_is_404(api):
    assert api.get(f"/api/v1/checkpoints/{uuid.uuid4()}/").status_code == 404


@pytest.mark.parametrize(
    "prefer",
    ["return=minimal", 'respond-async, RETURN="minimal"; x=1', "wait=5,return=minimal"],
)
def test_prefer_return_minimal_answers_the_identity_only(api, stored, prefer):
    """RFC 7240: the same registration, answered with its identity and Preference-Applied."""
    trial, _, _ = stored
    storage_id = str(uuid.uuid4())
    body = {"uuid": storage_id, "steps_completed": 50, "resources": {"a.bin": 3}, "metadata": {}}
    path = f"/api/v1/trials/{trial.id}/checkpoints/"
    created = api.post(path, body, format="json", HTTP_PREFER=prefer)
    assert created.status_code == 201
    assert created["Preference-Applied"] == "return=minimal"
    assert created.json() == {
        "uuid": storage_id,
        "trial_id": trial.id,
        "steps_completed": 50,
        "state": "COMPLETED",
    }
    again = api.post(path, body, format="json", HTTP_PREFER=prefer)
    assert again.status_code == 200 and again.json() == created.json()
    full = api.get(f"/api/v1/checkpoints/{storage_id}/").json()
    assert full["resources"] == {"a.bin": 3} and full["latest"] is True


@pytest.mark.parametrize("prefer", ["", "return=representation", "minimal", "respond-async"])
def test_other_preferences_answer_the_full_row(api, stored, prefer):
    trial, _, _ = stored
    body = {"uuid": str(uuid.uuid4()), "steps_completed": 60, "resources": {}, "metadata": {}}
    path = f"/api/v1/trials/{trial.id}/checkpoints/"
    response = api.post(path, body, format="json", HTTP_PREFER=prefer)
    assert response.status_code == 201 and "Preference-Applied" not in response
    assert {"validation_metrics", "best", "latest", "storage"} <= set(response.json())


def test_latest_checkpoint_follows_the_most_steps_and_ties_go_to_the_newest(api, stored):
    trial, first, _ = stored  # 40 steps

    def register(steps):
        storage_id = str(uuid.uuid4())
        body = {"uuid": storage_id, "steps_completed": steps, "resources": {"w.pth": 1}}
        answer = api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
        assert answer.status_code == 201
        trial.refresh_from_db()
        return storage_id

    register(20)
    assert str(trial.latest_checkpoint) == first  # fewer steps: the latest stays
    tie = register(40)
    assert str(trial.latest_checkpoint) == tie  # as many steps, registered later
    most = register(60)
    assert str(trial.latest_checkpoint) == most
    detail = api.get(f"/api/v1/checkpoints/{most}/").json()
    assert detail["latest"] is True and detail["steps_completed"] == 60


def test_a_download_reads_the_checkpoint_once_without_its_trial_or_metadata(api, stored):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _, storage_id, _ = stored
    for params in ({"path": "code/notes.txt"}, {"format": "tar"}):
        with CaptureQueriesContext(connection) as queries:
            response = api.get(f"/api/v1/checkpoints/{storage_id}/download", params)
            assert response.status_code == 200
            b"".join(response.streaming_content)
        reads = [q["sql"] for q in queries if "registry_checkpoint" in q["sql"]]
        assert len(reads) == 1, reads
        # The trial and its experiment are joined only for the workspace filter (who may
        # read the checkpoint): none of their columns, nor the metadata, is selected.
        selected = reads[0].split(" FROM ")[0]
        assert "registry_trial" not in selected and "metadata" not in selected
