"""``StorageManager.put_file`` (the master's writer of files sent through it) on shared_fs and
S3, and ``MasterStorageManager``'s retries of a file through a master outage."""

from __future__ import annotations

import io
import pathlib
import uuid

import pytest
import requests

from headway.client import APIError
from headway.storage import SharedFSStorageManager, build_storage_manager
from headway.storage._master import MasterStorageManager, transient_master_error


class _Cut(io.BytesIO):
    """A body whose reader fails half-way (a client gone mid-upload)."""

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(4)
        if not data:
            raise ConnectionResetError("client went away")
        return data


def test_shared_fs_put_file_replaces_writes_the_marker_and_refuses_bad_paths(
    tmp_path: pathlib.Path,
) -> None:
    manager = SharedFSStorageManager(tmp_path)
    storage_id = str(uuid.uuid4())
    assert manager.put_file(storage_id, "a/b.bin", io.BytesIO(b"first"), trial_id=7) == 5
    assert manager.put_file(storage_id, "a/b.bin", io.BytesIO(b"second"), trial_id=7) == 6
    assert manager.list_files(storage_id) == {"a/b.bin": 6}
    assert manager.read_marker(storage_id) == {"headway_checkpoint": storage_id, "trial_id": 7}
    for bad in ("../x", "/x", "a//b", "a/b.bin/c", ".headway-checkpoint.json"):
        with pytest.raises(ValueError):
            manager.put_file(storage_id, bad, io.BytesIO(b"x"))
    with pytest.raises(ConnectionResetError):
        manager.put_file(storage_id, "a/b.bin", _Cut(b"0123456789"))
    # The failed write left the earlier file whole and no temporary file behind.
    assert manager.list_files(storage_id) == {"a/b.bin": 6}
    assert (tmp_path / storage_id / "a" / "b.bin").read_bytes() == b"second"


def test_s3_put_file_replaces_and_writes_the_marker(s3_endpoint) -> None:
    config = {"type": "s3", "bucket": f"put-{uuid.uuid4().hex[:8]}", "endpoint_url": s3_endpoint}
    manager = build_storage_manager(config)
    manager._client.create_bucket(Bucket=config["bucket"])  # type: ignore[attr-defined]
    storage_id = str(uuid.uuid4())
    manager.put_file(storage_id, "m.pt", io.BytesIO(b"one"), trial_id=3)
    assert manager.put_file(storage_id, "m.pt", io.BytesIO(b"three"), trial_id=3) == 5
    assert manager.list_files(storage_id) == {"m.pt": 5}
    assert manager.read_marker(storage_id) == {"headway_checkpoint": storage_id, "trial_id": 3}
    with pytest.raises(ValueError):
        manager.put_file(storage_id, ".headway-checkpoint.json", io.BytesIO(b"x"))


def test_master_uploads_are_retried_through_an_outage_and_sent_whole(monkeypatch) -> None:
    monkeypatch.setenv("HEADWAY_STORAGE_RETRY_SECONDS", "30")
    manager = MasterStorageManager("http://127.0.0.1:9", "token", 1, 1)
    bodies: list[bytes] = []

    def request(method: str, path: str, **kwargs) -> None:
        bodies.append(kwargs["data"].read())
        if len(bodies) == 1:
            raise requests.ConnectionError("refused")
        if len(bodies) == 2:
            raise APIError("busy", status=503)

    monkeypatch.setattr(manager._session, "request", request)
    storage_id = str(uuid.uuid4())
    with manager.store_path(storage_id) as path:
        (path / "w.bin").write_bytes(b"weights")
    assert bodies == [b"weights"] * 3
    assert manager._sent[storage_id] == {"w.bin": 7}


def test_a_refusal_is_not_retried() -> None:
    assert not transient_master_error(APIError("bad path", status=400))
    assert not transient_master_error(APIError("too large", status=413))
    assert transient_master_error(APIError("unreachable", status=None))
