"""S3 storage against moto's S3 server (a real HTTP endpoint, boto3 unpatched)."""

from __future__ import annotations

import io
import tarfile

import pytest

from headway.storage import S3StorageManager, build_storage_manager, iter_tar_chunks
from headway.storage._base import MARKER_FILE

SID = "6f1c8a2e-1111-4c52-8d5e-5a1f7a3a2f10"


@pytest.fixture
def manager(s3_endpoint: str) -> S3StorageManager:
    mgr = build_storage_manager(
        {"type": "s3", "bucket": "ckpts", "prefix": "exp/", "endpoint_url": s3_endpoint}
    )
    assert isinstance(mgr, S3StorageManager)
    mgr._client.create_bucket(Bucket="ckpts")
    return mgr


def test_s3_store_list_open_restore_tar_delete(manager: S3StorageManager) -> None:
    with manager.store_path(SID) as path:
        (path / "a.bin").write_bytes(b"a" * 10)
        (path / "sub").mkdir()
        (path / "sub" / "b.txt").write_bytes(b"hello")
    assert manager.exists(SID)
    assert manager.list_files(SID) == {"a.bin": 10, "sub/b.txt": 5}
    keys = [o["Key"] for o in manager._client.list_objects_v2(Bucket="ckpts")["Contents"]]
    # The marker is stored first and is no file of the checkpoint's.
    assert sorted(keys) == [f"exp/{SID}/{MARKER_FILE}", f"exp/{SID}/a.bin", f"exp/{SID}/sub/b.txt"]
    assert manager.read_marker(SID) == {"headway_checkpoint": SID, "trial_id": None}
    with manager.open_file(SID, "sub/b.txt") as fh:
        assert fh.read() == b"hello"
    with pytest.raises(ValueError):
        manager.open_file(SID, "../x")
    with pytest.raises(FileNotFoundError):
        manager.open_file(SID, "missing")
    with manager.restore_path(SID) as restored:
        assert (restored / "sub" / "b.txt").read_bytes() == b"hello"
    with tarfile.open(fileobj=io.BytesIO(b"".join(iter_tar_chunks(manager, SID)))) as archive:
        assert archive.extractfile("a.bin").read() == b"a" * 10
    manager.delete(SID)
    assert not manager.exists(SID)
    with pytest.raises(FileNotFoundError):
        manager.list_files(SID)


def test_s3_uploads_nothing_when_the_block_raises(manager: S3StorageManager) -> None:
    with pytest.raises(RuntimeError), manager.store_path(SID) as path:
        (path / "x").write_bytes(b"x")
        raise RuntimeError("boom")
    assert not manager.exists(SID)
