"""Checkpoint downloads from shared_fs through the real web server (gunicorn, as ``manage.py
serve`` runs it), where a single file goes out through the WSGI file wrapper (``sendfile``):
the whole file, byte ranges and the archives carry exactly the stored bytes.

The registry views are tested in process with Django's client elsewhere
(tests/registry/checkpoints/test_checkpoint_download_formats.py); this is the path only a real server takes.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest
import requests

from headway.client import Session
from headway.core import CheckpointContext, DistributedContext
from headway.core._checkpoint_registry import RESTCheckpointRegistry
from headway.storage import SharedFSStorageManager
from tests.helpers import REPO, b64, free_port, make_tar_gz
from tests.helpers_web import WebServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def served(tmp_path):
    """``(url, token, trial id, storage manager)`` of a gunicorn on a fresh embedded setup
    whose one storage location is a shared_fs folder."""
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "checkpoints")}
    locations = tmp_path / "locations.json"
    locations.write_text(json.dumps({"default": "disk", "locations": {"disk": storage}}))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        HEADWAY_VAR_DIR=str(tmp_path / "var"),
        HEADWAY_STORAGE_LOCATIONS=str(locations),
    )

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    manage("migrate", "-v", "0")
    token = manage("headway_token", "alice", "--create")
    server = WebServer(free_port(), env, tmp_path / "web.log")
    server.start()
    try:
        config = {
            "name": "served-downloads",
            "entrypoint": "python train.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
            "checkpoint_storage": storage,
        }
        http = requests.Session()
        http.headers["Authorization"] = f"Token {token}"
        model = b64(make_tar_gz({"train.py": ""}))
        answer = http.post(
            f"{server.url}/api/v1/experiments/",
            json={"config": config, "model_definition": model},
            timeout=60,
        )
        assert answer.status_code == 201, answer.text
        trials = http.get(f"{server.url}/api/v1/experiments/{answer.json()['id']}/trials/")
        trial_id = int(trials.json()["results"][0]["id"])
        yield server.url, http, trial_id, SharedFSStorageManager(storage["host_path"])
    finally:
        server.kill()


def test_shared_fs_files_ranges_and_archives_through_gunicorn(served):
    url, http, trial_id, manager = served
    context = CheckpointContext(
        distributed=DistributedContext(
            rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
        ),
        storage_manager=manager,
        registry=RESTCheckpointRegistry(
            Session(url, http.headers["Authorization"][6:]), trial_id, 1
        ),
    )
    big = os.urandom(3 * (1 << 20) + 17)  # more than one 1 MiB block, not a multiple of it
    with context.store_path({"steps_completed": 1}) as (path, storage_id):
        (path / "model").mkdir()
        (path / "model" / "big.bin").write_bytes(big)
        (path / "empty.bin").write_bytes(b"")
    download = f"{url}/api/v1/checkpoints/{storage_id}/download"

    whole = http.get(download, params={"path": "model/big.bin"}, timeout=60)
    assert whole.status_code == 200
    assert whole.headers["Content-Length"] == str(len(big))
    assert whole.content == big

    for header, first, last in (
        ("bytes=1000-2000099", 1000, 2000099),
        ("bytes=-5", len(big) - 5, len(big) - 1),
        (f"bytes={(1 << 20) - 1}-", (1 << 20) - 1, len(big) - 1),
    ):
        part = http.get(download, params={"path": "model/big.bin"}, headers={"Range": header})
        assert part.status_code == 206, header
        assert part.headers["Content-Range"] == f"bytes {first}-{last}/{len(big)}"
        assert part.content == big[first : last + 1], header

    empty = http.get(download, params={"path": "empty.bin"}, timeout=60)
    assert empty.status_code == 200 and empty.content == b""

    tar = http.get(download, params={"format": "tar"}, timeout=60)
    with tarfile.open(fileobj=io.BytesIO(tar.content)) as archive:
        member = archive.extractfile("model/big.bin")
        assert member is not None and member.read() == big
    zipped = http.get(download, params={"format": "zip"}, timeout=60)
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive:
        assert archive.read("model/big.bin") == big
        assert archive.read("empty.bin") == b""
