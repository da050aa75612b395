"""Storage locations belong to the admin (the second audit's High and first Medium finding).

The audit's repro, on the stack the session runs (SQLite, or PostgreSQL with DATABASE_URL):
two users, Alice (the victim) and Mallory; a victim folder (0700) and a victim bucket on the
moto S3 server, both outside the admin's locations, each holding an hour-old uuid-named
checkpoint. Before the fix Mallory aimed ``checkpoint_storage`` at them: a GC request deleted
Alice's files, and registering their uuid on Mallory's trial let her download them.

Now submission refuses the place (400 naming the field); an experiment stored before the fix
(its config written straight into the database here) gets nothing from the registry: GC skips
it, registration and downloads are refused; a checkpoint registered under a foreign uuid is
bound to Mallory's own location, where no such files are. Orphan clean-up inside a location
takes only what a marker proves is one of the experiment's own trials' checkpoints.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from config.storage_locations import load_storage_locations
from headway.storage import build_storage_manager
from registry.lifecycle import checkpoint_gc
from registry.models import Checkpoint, Experiment, Trial
from tests.helpers import TINY_CONFIG, create_experiment, start_run

pytestmark = pytest.mark.django_db

SECRET = b"alice's weights" * 10


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _write(storage: dict, trial_id: int | None, files: dict[str, bytes]) -> str:
    """A checkpoint written by the SDK (marker included, naming ``trial_id``); its files are
    made an hour old, past the orphan grace period."""
    storage_id = str(uuid.uuid4())
    manager = build_storage_manager(storage)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HEADWAY_TRIAL_ID", str(trial_id or ""))
        with manager.store_path(storage_id) as path:
            for name, data in files.items():
                (path / name).write_bytes(data)
    if storage["type"] == "shared_fs":
        past = time.time() - 2 * 3600
        folder = manager.base_path / storage_id
        for entry in [folder, *folder.rglob("*")]:
            os.utime(entry, (past, past))
    return storage_id


@pytest.fixture
def stack(tmp_path, settings, s3_endpoint):
    """The admin's locations (a YAML file, as HEADWAY_STORAGE_LOCATIONS names it): a shared
    folder and a bucket prefix; the victim's folder and bucket outside them."""
    admin_bucket, victim_bucket = f"admin-{uuid.uuid4().hex[:8]}", f"alice-{uuid.uuid4().hex[:8]}"
    shared = tmp_path / "admin-shared"
    shared.mkdir()
    (tmp_path / "locations.yaml").write_text(
        "default: shared\n"
        "locations:\n"
        f"  shared: {{type: shared_fs, host_path: {shared}}}\n"
        f"  bucket: {{type: s3, bucket: {admin_bucket}, prefix: headway, "
        f"endpoint_url: '{s3_endpoint}'}}\n"
    )
    settings.HEADWAY_STORAGE_LOCATIONS = load_storage_locations(str(tmp_path / "locations.yaml"))
    # Outside pytest's temporary root and every location: someone else's private folder.
    victim_dir = Path(tempfile.mkdtemp(prefix="headway-victim-"))
    victim_dir.chmod(0o700)
    s3 = {"type": "s3", "bucket": victim_bucket, "prefix": "private", "endpoint_url": s3_endpoint}
    manager = build_storage_manager(s3)
    for bucket in (admin_bucket, victim_bucket):
        manager._client.create_bucket(Bucket=bucket)
    try:
        yield {
            "shared_fs": {"type": "shared_fs", "host_path": str(victim_dir)},
            "s3": s3,
            "shared": shared,
        }
    finally:
        shutil.rmtree(victim_dir, ignore_errors=True)


@pytest.fixture
def users(django_user_model):
    """Alice's and Mallory's user tokens."""
    out = {}
    for name in ("alice", "mallory"):
        user = django_user_model.objects.create_user(name)
        out[name] = Token.objects.create(user=user).key
    return out


def _experiment(token: str, storage: dict | None = None) -> Trial:
    config = TINY_CONFIG + (f"checkpoint_storage: {json.dumps(storage)}\n" if storage else "")
    response = create_experiment(_client(token), config=config)
    assert response.status_code == 201, response.json()
    return Trial.objects.get(experiment_id=response.json()["id"])


def _stored_before_the_fix(trial: Trial, storage: dict) -> None:
    """Point the trial's experiment at ``storage`` as an old stored config could."""
    Experiment.objects.filter(id=trial.experiment_id).update(
        config={**trial.experiment.config, "checkpoint_storage": storage}
    )
    trial.experiment.refresh_from_db()


@pytest.mark.parametrize("kind", ["shared_fs", "s3"])
def test_gc_cannot_delete_outside_admin_locations(stack, users, kind):
    victim = stack[kind]
    secret = _write(victim, None, {"weights.bin": SECRET})
    mallory = _client(users["mallory"])
    field = "host_path" if kind == "shared_fs" else "bucket"
    refused = create_experiment(
        mallory, config=TINY_CONFIG + f"checkpoint_storage: {json.dumps(victim)}\n"
    )
    assert refused.status_code == 400
    assert list(refused.json()["errors"]) == [f"config.checkpoint_storage.{field}"]
    assert not Experiment.objects.exists()

    # An experiment stored before the fix, even with a marker naming Mallory's own trial.
    trial = _experiment(users["mallory"])
    marked = _write(victim, trial.id, {"weights.bin": SECRET})
    _stored_before_the_fix(trial, victim)
    answer = mallory.post(f"/api/v1/experiments/{trial.experiment_id}/checkpoints/gc/")
    assert answer.status_code == 202, answer.content
    # What the worker's task does with it (run here, at a time far past the grace period).
    result = checkpoint_gc(experiment_id=trial.experiment_id, now=timezone.now() + timedelta(1))
    assert result.orphans == []
    manager = build_storage_manager(victim)
    assert manager.exists(secret) and manager.exists(marked)
    with manager.open_file(secret, "weights.bin") as fh:
        assert fh.read() == SECRET


@pytest.mark.parametrize("kind", ["shared_fs", "s3"])
def test_cannot_read_foreign_uuid_via_registration(stack, users, kind):
    victim = stack[kind]
    secret = _write(victim, None, {"weights.bin": SECRET})
    location = "shared" if kind == "shared_fs" else "bucket"
    trial = _experiment(users["mallory"], {"location": location})
    run = start_run(trial)
    # Mallory's trial process registers the victim's uuid on its own trial: allowed (the uuid
    # is new to the registry) but bound to Mallory's own location, where no such files are.
    hostile = _client(run.token)
    body = {"uuid": secret, "steps_completed": 1, "resources": {"weights.bin": len(SECRET)}}
    # The request cannot name a place: such a field is refused, not silently dropped.
    for field, value in (("storage", victim), ("host_path", "/"), ("bucket", "b")):
        answer = hostile.post(
            f"/api/v1/trials/{trial.id}/checkpoints/", {**body, field: value}, format="json"
        )
        assert answer.status_code == 400 and list(answer.json()["errors"]) == [field]
    registered = hostile.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert registered.status_code == 201, registered.json()
    row = Checkpoint.objects.get(uuid=secret)
    assert row.storage["location"] == location
    assert row.storage == {
        k: v for k, v in trial.experiment.config["checkpoint_storage"].items() if k in row.storage
    }
    mallory = _client(users["mallory"])
    whole = mallory.get(f"/api/v1/checkpoints/{secret}/download")
    assert whole.status_code == 410
    one = mallory.get(f"/api/v1/checkpoints/{secret}/download", {"path": "weights.bin"})
    assert one.status_code in (404, 410)
    if kind == "s3":
        presigned = mallory.get(
            f"/api/v1/checkpoints/{secret}/download",
            {"path": "weights.bin", "redirect": "presigned"},
        )
        assert presigned.status_code in (404, 410)
        assert "Location" not in presigned.headers


@pytest.mark.parametrize("kind", ["shared_fs", "s3"])
def test_cannot_read_foreign_uuid_through_a_config_stored_before_the_fix(stack, users, kind):
    victim = stack[kind]
    secret = _write(victim, None, {"weights.bin": SECRET})
    trial = _experiment(users["mallory"])
    run = start_run(trial)
    _stored_before_the_fix(trial, victim)
    field = "host_path" if kind == "shared_fs" else "bucket"
    body = {"uuid": secret, "steps_completed": 1, "resources": {"weights.bin": len(SECRET)}}
    answer = _client(run.token).post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert answer.status_code == 400
    assert list(answer.json()["errors"]) == [f"checkpoint_storage.{field}"]
    # A checkpoint row stored before the fix with the victim's place: downloads refused.
    Checkpoint.objects.create(
        uuid=secret, trial=trial, steps_completed=1, resources={"weights.bin": 1}, storage=victim
    )
    mallory = _client(users["mallory"])
    for params in ({}, {"path": "weights.bin"}, {"path": "weights.bin", "redirect": "presigned"}):
        refused = mallory.get(f"/api/v1/checkpoints/{secret}/download", params)
        assert refused.status_code == 400, params
        assert f"checkpoint_storage.{field}" in refused.json()["errors"]
        assert SECRET not in refused.content


def test_gc_deletes_only_its_own_trials_marked_orphans_inside_a_location(stack, users):
    """Alice and Mallory share a sub-folder of the admin's location: Mallory's GC takes her own
    trial's crashed upload, not Alice's, not an unmarked uuid folder, not a registered one."""
    place = {"location": "shared", "storage_path": "team"}
    alice, mallory = _experiment(users["alice"], place), _experiment(users["mallory"], place)
    storage = mallory.experiment.config["checkpoint_storage"]
    assert storage == {**storage, "host_path": str(stack["shared"]), "storage_path": "team"}
    own = _write(storage, mallory.id, {"half.bin": b"x"})
    alices = _write(storage, alice.id, {"half.bin": b"x"})
    unmarked = str(uuid.uuid4())
    folder = stack["shared"] / "team" / unmarked
    folder.mkdir()
    (folder / "notes.txt").write_text("not a checkpoint")
    os.utime(folder, (time.time() - 7200,) * 2)
    result = checkpoint_gc(experiment_id=mallory.experiment_id)
    assert result.orphans == [own]
    team = stack["shared"] / "team"
    left = sorted(p.name for p in team.iterdir())
    assert left == sorted([alices, unmarked, f".{alices}.headway-checkpoint.json"])


def test_a_symbolic_link_inside_a_location_does_not_lead_the_registry_out(stack, users):
    """Trial code can write into a location: a link there to the victim's folder, named as
    the experiment's ``storage_path``, is refused when the registry would follow it."""
    victim = stack["shared_fs"]
    secret = _write(victim, None, {"weights.bin": SECRET})
    (stack["shared"] / "escape").symlink_to(victim["host_path"])
    trial = _experiment(users["mallory"], {"location": "shared", "storage_path": "escape"})
    checkpoint = Checkpoint.objects.create(
        uuid=secret,
        trial=trial,
        steps_completed=1,
        resources={"weights.bin": len(SECRET)},
        storage=trial.experiment.config["checkpoint_storage"],
    )
    answer = _client(users["mallory"]).get(f"/api/v1/checkpoints/{checkpoint.uuid}/download")
    assert answer.status_code == 400
    assert "checkpoint_storage.storage_path" in answer.json()["errors"]
    _write(victim, trial.id, {"weights.bin": SECRET})  # marked as Mallory's: still not touched
    assert (
        checkpoint_gc(experiment_id=trial.experiment_id, now=timezone.now() + timedelta(1)).orphans
        == []
    )
    assert build_storage_manager(victim).exists(secret)
