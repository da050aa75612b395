"""The admin's storage locations: the settings file, how an experiment picks a
location (by name, a sub-path in one, its folder or bucket, or the default), the embedded
default, configs stored before the locations existed, and the SDK's checkpoint marker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.storage_locations import load_storage_locations
from headway.storage import build_storage_manager
from registry.errors import InvalidInput
from registry.storage_locations import resolve_storage
from tests.helpers import REPO, TINY_CONFIG, create_experiment, register_checkpoint

ENDPOINT = "http://minio.internal:9000"


@pytest.fixture
def admin(tmp_path, settings):
    """Two shared_fs locations and an s3 one, ``fast`` the default."""
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    path = tmp_path / "locations.yaml"
    path.write_text(
        "default: fast\n"
        "locations:\n"
        f"  fast: {{type: shared_fs, host_path: {fast}}}\n"
        f"  slow: {{type: shared_fs, host_path: '{slow}/'}}\n"
        f"  lake: {{type: s3, bucket: lake, prefix: /headway/, endpoint_url: '{ENDPOINT}', "
        "region: eu-west-1}\n"
    )
    settings.HEADWAY_STORAGE_LOCATIONS = load_storage_locations(str(path))
    return {"fast": str(fast), "slow": str(slow)}


# -- the settings file -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("locations: {}\n", "locations"),
        ("locations: {a: {type: gcs, bucket: b}}\n", "locations.a"),
        ("locations: {a: {type: shared_fs, host_path: rel/dir}}\n", "must be absolute"),
        ("locations: {a: {type: shared_fs, host_path: /x, bucket: b}}\n", "bucket"),
        ("locations: {a: {type: s3, bucket: bkt, endpoint_url: 'ftp://x'}}\n", "endpoint_url"),
        ("locations: {'a b': {type: shared_fs, host_path: /x}}\n", "a name is"),
        (
            "locations: {a: {type: shared_fs, host_path: /a}, b: {type: shared_fs, host_path: /b}}\n",
            "`default` must name",
        ),
        ("default: c\nlocations: {a: {type: shared_fs, host_path: /a}}\n", "default 'c'"),
        ("[1, 2\n", "not YAML"),
    ],
)
def test_a_bad_locations_file_stops_the_server_naming_the_variable(tmp_path, text, message):
    path = tmp_path / "locations.yaml"
    path.write_text(text)
    with pytest.raises(ImproperlyConfigured, match="HEADWAY_STORAGE_LOCATIONS") as raised:
        load_storage_locations(str(path))
    assert message in str(raised.value)


def test_the_settings_read_the_file_the_variable_names(tmp_path):
    """At start-up: a good file is loaded, a missing one stops ``manage.py check``."""
    path = tmp_path / "locations.yaml"
    path.write_text(f"locations: {{only: {{type: shared_fs, host_path: {tmp_path}}}}}\n")
    probe = (
        "import django; django.setup(); from django.conf import settings; "
        "s = settings.HEADWAY_STORAGE_LOCATIONS; print(s.default, s.locations['only'].host_path)"
    )
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings"}
    env["HEADWAY_VAR_DIR"] = str(tmp_path / "var")
    good = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={**env, "HEADWAY_STORAGE_LOCATIONS": str(path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert good.stdout.split() == ["only", str(tmp_path)], good.stderr
    bad = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env={**env, "HEADWAY_STORAGE_LOCATIONS": str(tmp_path / "missing.yaml")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0
    assert "HEADWAY_STORAGE_LOCATIONS: cannot read" in bad.stderr


# -- resolving a config --------------------------------------------------------------------------


def test_an_experiment_picks_a_location_by_name_a_sub_path_its_folder_or_the_default(admin):
    fast, slow = admin["fast"], admin["slow"]
    expect_fast = {"type": "shared_fs", "location": "fast", "host_path": fast}
    assert resolve_storage(None) == {**expect_fast, "storage_path": None}
    assert resolve_storage({"type": "shared_fs"}) == {**expect_fast, "storage_path": None}
    assert resolve_storage({"location": "slow", "storage_path": "team/a/"}) == {
        "type": "shared_fs",
        "location": "slow",
        "host_path": slow,
        "storage_path": "team/a",
    }
    # Determined's form: the folder (and sub-folder) inside a location, retention kept.
    resolved = resolve_storage(
        {"type": "shared_fs", "host_path": f"{slow}/x", "storage_path": "y", "save_trial_best": 3}
    )
    assert resolved == {
        "type": "shared_fs",
        "location": "slow",
        "host_path": slow,
        "storage_path": "x/y",
        "save_trial_best": 3,
    }
    assert resolve_storage(resolved) == resolved  # a stored config resolves to itself
    lake = {
        "type": "s3",
        "location": "lake",
        "bucket": "lake",
        "endpoint_url": ENDPOINT,
        "region": "eu-west-1",
    }
    assert resolve_storage({"location": "lake"}) == {**lake, "prefix": "headway"}
    assert resolve_storage({"type": "s3", "location": "lake", "storage_path": "exp"}) == {
        **lake,
        "prefix": "headway/exp",
    }
    legacy = {"type": "s3", "bucket": "lake", "prefix": "headway/mine", "endpoint_url": ENDPOINT}
    assert resolve_storage(legacy) == {**lake, "prefix": "headway/mine"}


def test_the_innermost_of_nested_locations_holds_a_folder(tmp_path, settings):
    path = tmp_path / "locations.yaml"
    path.write_text(
        "default: outer\nlocations:\n"
        f"  outer: {{type: shared_fs, host_path: {tmp_path}}}\n"
        f"  inner: {{type: shared_fs, host_path: {tmp_path / 'team'}}}\n"
    )
    settings.HEADWAY_STORAGE_LOCATIONS = load_storage_locations(str(path))
    resolved = resolve_storage({"type": "shared_fs", "host_path": str(tmp_path / "team" / "a")})
    assert (resolved["location"], resolved["storage_path"]) == ("inner", "a")
    resolved = resolve_storage({"type": "shared_fs", "host_path": str(tmp_path / "teams")})
    assert (resolved["location"], resolved["storage_path"]) == ("outer", "teams")


@pytest.mark.parametrize(
    ("storage", "field"),
    [
        ({"location": "nowhere"}, "location"),
        ({"type": "s3", "location": "fast"}, "type"),
        ({"type": "shared_fs", "host_path": "/etc"}, "host_path"),
        ({"type": "shared_fs", "location": "fast", "host_path": "/srv/x"}, "host_path"),
        ({"location": "fast", "storage_path": "../slow"}, "storage_path"),
        ({"type": "s3", "bucket": "other"}, "bucket"),
        ({"type": "s3", "bucket": "lake", "endpoint_url": "http://elsewhere:9000"}, "endpoint_url"),
        ({"type": "s3", "bucket": "lake", "prefix": "other", "endpoint_url": ENDPOINT}, "prefix"),
        (
            {"type": "s3", "bucket": "lake", "prefix": "headwayx", "endpoint_url": ENDPOINT},
            "prefix",
        ),
        ({"location": "lake", "region": "us-east-1", "type": "s3"}, "region"),
    ],
)
def test_a_place_outside_the_locations_is_refused_naming_the_field(admin, storage, field):
    with pytest.raises(InvalidInput) as raised:
        resolve_storage(storage)
    assert list(raised.value.errors) == [f"config.checkpoint_storage.{field}"]


@pytest.mark.django_db
def test_submission_stores_the_resolved_location_and_refuses_others_with_a_400(api, admin):
    created = create_experiment(
        api, config=TINY_CONFIG + "checkpoint_storage: {location: slow, storage_path: runs}\n"
    )
    assert created.status_code == 201, created.json()
    storage = created.json()["config"]["checkpoint_storage"]
    assert storage["location"] == "slow" and storage["host_path"] == admin["slow"]
    assert storage["storage_path"] == "runs" and storage["save_trial_latest"] == 1
    refused = create_experiment(
        api, config=TINY_CONFIG + "checkpoint_storage: {type: shared_fs, host_path: /root}\n"
    )
    assert refused.status_code == 400
    assert list(refused.json()["errors"]) == ["config.checkpoint_storage.host_path"]


@pytest.mark.django_db
def test_the_embedded_default_follows_the_checkpoint_dir(api, settings, tmp_path):
    """Without HEADWAY_STORAGE_LOCATIONS the one location is ``default`` at
    HEADWAY_CHECKPOINT_DIR (``make demo``), and a folder outside it is refused."""
    settings.HEADWAY_STORAGE_LOCATIONS = None
    settings.HEADWAY_CHECKPOINT_DIR = tmp_path / "ckpt"
    created = create_experiment(api)
    assert created.json()["config"]["checkpoint_storage"]["host_path"] == str(tmp_path / "ckpt")
    assert created.json()["config"]["checkpoint_storage"]["location"] == "default"
    outside = json.dumps({"type": "shared_fs", "host_path": str(tmp_path / "other")})
    refused = create_experiment(api, config=TINY_CONFIG + f"checkpoint_storage: {outside}\n")
    assert refused.status_code == 400


@pytest.mark.django_db
def test_an_experiment_stored_before_the_locations_keeps_working_inside_one(api, admin):
    """Migration: a stored config without ``location`` is mapped to the location holding its
    folder when it is used (registration, downloads)."""
    from registry.models import Experiment, Trial

    trial = Trial.objects.get(experiment_id=create_experiment(api).json()["id"])
    old = {"type": "shared_fs", "host_path": admin["slow"], "storage_path": "2024"}
    Experiment.objects.filter(id=trial.experiment_id).update(
        config={**trial.experiment.config, "checkpoint_storage": old}
    )
    trial.refresh_from_db()
    checkpoint = register_checkpoint(trial)
    assert checkpoint.storage["location"] == "slow"
    manager = build_storage_manager(old)
    with manager.store_path(str(checkpoint.uuid)) as path:
        (path / "state-dict.pth").write_bytes(b"x" * 10)
    answer = api.get(f"/api/v1/checkpoints/{checkpoint.uuid}/download", {"path": "state-dict.pth"})
    assert answer.status_code == 200 and b"".join(answer.streaming_content) == b"x" * 10


@pytest.mark.django_db
def test_storage_locations_check_lists_what_the_locations_leave_out(api, admin, capsys):
    from django.core.management import CommandError, call_command

    from registry.models import Experiment, Trial

    call_command("storage_locations_check")
    assert "Every experiment and checkpoint is inside" in capsys.readouterr().out
    trial = Trial.objects.get(experiment_id=create_experiment(api).json()["id"])
    old = {"type": "shared_fs", "host_path": "/srv/old-checkpoints"}
    Experiment.objects.filter(id=trial.experiment_id).update(
        config={**trial.experiment.config, "checkpoint_storage": old}
    )
    with pytest.raises(CommandError, match="1 storage place"):
        call_command("storage_locations_check")
    out = capsys.readouterr().out
    assert "/srv/old-checkpoints" in out and f"experiments {trial.experiment_id}" in out
    assert "checkpoint_storage.host_path" in out


# -- the marker ----------------------------------------------------------------------------------


def test_every_checkpoint_gets_a_marker_naming_the_trial_process(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADWAY_TRIAL_ID", "42")
    manager = build_storage_manager({"type": "shared_fs", "host_path": str(tmp_path)})
    storage_id = str(uuid.uuid4())
    with manager.store_path(storage_id) as path:
        (path / "w.bin").write_bytes(b"w")
    assert manager.read_marker(storage_id) == {"headway_checkpoint": storage_id, "trial_id": 42}
    # Next to the folder, not in it: the folder holds the checkpoint's files only.
    assert sorted(p.name for p in (tmp_path / storage_id).iterdir()) == ["w.bin"]
    assert manager.list_files(storage_id) == {"w.bin": 1}
    # Another checkpoint's marker copied in, or a link in its place, proves nothing.
    other = str(uuid.uuid4())
    (tmp_path / other).mkdir()
    manager.marker_path(other).write_bytes(manager.marker_path(storage_id).read_bytes())
    assert manager.read_marker(other) is None
    manager.marker_path(other).unlink()
    manager.marker_path(other).symlink_to(manager.marker_path(storage_id))
    assert manager.read_marker(other) is None
    manager.delete(storage_id)  # deleting a checkpoint deletes its marker
    assert not manager.marker_path(storage_id).exists()


def test_the_compose_files_locations_load():
    found = load_storage_locations(str(REPO / "deploy" / "storage-locations.yaml"))
    assert found.default == "shared"
    assert found.locations["shared"].host_path == "/data/checkpoints"
    assert found.locations["minio"].bucket == "checkpoints"
