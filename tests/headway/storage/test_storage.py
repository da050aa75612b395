"""Checkpoint storage: shared_fs manager, the backend builder, and streaming tars."""

from __future__ import annotations

import io
import os
import pathlib
import tarfile

import pytest

from headway.archive import UnsafeArchivePath
from headway.expconf import SharedFSConfig
from headway.storage import (
    SharedFSStorageManager,
    build_storage_manager,
    iter_tar_chunks,
    tar_size,
)

SID = "0b7e4c1e-9a51-4c52-8d5e-5a1f7a3a2f10"


def _write_checkpoint(manager: SharedFSStorageManager) -> dict[str, bytes]:
    files = {
        "model.pt": os.urandom(3000),
        "sub/dir/opt.bin": os.urandom(1 << 16) + b"tail",
        "empty.txt": b"",
        "x" * 120 + "/long-name-needs-pax-header.txt": b"long",
    }
    with manager.store_path(SID) as path:
        for rel, data in files.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_bytes(data)
    return files


def test_it_stores_in_the_final_directory_and_lists_files(tmp_path: pathlib.Path) -> None:
    manager = SharedFSStorageManager(tmp_path / "ckpts")
    files = _write_checkpoint(manager)
    assert (tmp_path / "ckpts" / SID / "model.pt").read_bytes() == files["model.pt"]
    assert manager.exists(SID)
    assert manager.list_files(SID) == {rel: len(data) for rel, data in files.items()}
    with manager.restore_path(SID) as path:
        assert path == tmp_path / "ckpts" / SID
    with manager.open_file(SID, "sub/dir/opt.bin") as fh:
        assert fh.read() == files["sub/dir/opt.bin"]


def test_it_deletes_a_partial_checkpoint_when_the_block_raises(tmp_path: pathlib.Path) -> None:
    manager = SharedFSStorageManager(tmp_path)
    with pytest.raises(RuntimeError, match="boom"), manager.store_path(SID) as path:
        (path / "half.bin").write_bytes(b"x")
        raise RuntimeError("boom")
    assert not manager.exists(SID)
    assert not (tmp_path / SID).exists()


@pytest.mark.parametrize("relpath", ["../x", "/etc/passwd", "a/../../x", "", "a//b", "a\\b"])
def test_it_rejects_paths_leaving_the_checkpoint(tmp_path: pathlib.Path, relpath: str) -> None:
    manager = SharedFSStorageManager(tmp_path)
    _write_checkpoint(manager)
    with pytest.raises(ValueError):
        manager.open_file(SID, relpath)


def test_it_rejects_symlinks_pointing_outside(tmp_path: pathlib.Path) -> None:
    manager = SharedFSStorageManager(tmp_path / "ckpts")
    _write_checkpoint(manager)
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (tmp_path / "ckpts" / SID / "link").symlink_to(secret)
    with pytest.raises(ValueError, match="outside"):
        manager.open_file(SID, "link")
    assert "link" not in manager.list_files(SID)


@pytest.mark.parametrize("storage_id", ["../etc", "a/b", ".hidden", ""])
def test_it_rejects_unsafe_storage_ids(tmp_path: pathlib.Path, storage_id: str) -> None:
    with pytest.raises(ValueError, match="storage id"):
        SharedFSStorageManager(tmp_path).exists(storage_id)


def test_missing_checkpoint_raises_file_not_found(tmp_path: pathlib.Path) -> None:
    manager = SharedFSStorageManager(tmp_path)
    with pytest.raises(FileNotFoundError, match=SID):
        manager.list_files(SID)
    with pytest.raises(FileNotFoundError), manager.restore_path(SID):
        pass
    manager.delete(SID)  # deleting twice is fine


@pytest.mark.parametrize("chunk_size", [100, 1 << 20])
def test_tar_stream_contains_exactly_the_files(tmp_path: pathlib.Path, chunk_size: int) -> None:
    manager = SharedFSStorageManager(tmp_path)
    files = _write_checkpoint(manager)
    chunks = list(iter_tar_chunks(manager, SID, chunk_size=chunk_size))
    assert all(len(chunk) <= chunk_size + 512 * 3 for chunk in chunks[:-1])
    data = b"".join(chunks)
    assert len(data) % tarfile.RECORDSIZE == 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        members = archive.getmembers()
        assert sorted(m.name for m in members) == sorted(files)
        for member in members:
            assert member.isfile()
            assert archive.extractfile(member).read() == files[member.name]


def test_tar_size_is_the_streams_length_before_it_is_read(tmp_path: pathlib.Path) -> None:
    manager = SharedFSStorageManager(tmp_path)
    files = _write_checkpoint(manager)
    # PAX headers for a long and a non-ASCII name, an empty file, sizes on and off 512.
    files["é/ü.bin"] = b"\0" * 512
    (manager.base_path / SID / "é").mkdir()
    (manager.base_path / SID / "é" / "ü.bin").write_bytes(files["é/ü.bin"])
    sizes = manager.list_files(SID)
    assert sorted(sizes) == sorted(files)
    assert tar_size(sizes) == len(b"".join(iter_tar_chunks(manager, SID, files=sizes)))
    assert tar_size({}) == tarfile.RECORDSIZE
    with pytest.raises(UnsafeArchivePath, match="checkpoint file path"):
        tar_size({"../escape": 1})


def test_build_shared_fs_with_storage_path(tmp_path: pathlib.Path) -> None:
    manager = build_storage_manager(
        {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "sub"}
    )
    assert isinstance(manager, SharedFSStorageManager)
    assert manager.base_path == tmp_path / "sub"
    manager = build_storage_manager(
        {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": None}
    )
    assert manager.base_path == tmp_path


def test_build_takes_the_config_models_as_well_as_mappings(tmp_path: pathlib.Path) -> None:
    section = SharedFSConfig(type="shared_fs", host_path=str(tmp_path), storage_path="sub")
    manager = build_storage_manager(section)
    assert isinstance(manager, SharedFSStorageManager)
    assert manager.base_path == tmp_path / "sub"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"type": "gcs"}, "must be one of s3, shared_fs"),
        ({}, "checkpoint_storage.type"),
        ({"type": "shared_fs"}, "host_path is required"),
        ({"type": "shared_fs", "host_path": "rel/path"}, "must be absolute"),
        ({"type": "shared_fs", "host_path": "/x", "storage_path": "../up"}, "storage_path"),
        ({"type": "s3"}, "checkpoint_storage.bucket: required"),
        ({"type": "s3", "location": "fast"}, "bucket is required.*bare `location`"),
        ({"type": "s3", "bukket": "b"}, "checkpoint_storage.bukket: unknown field"),
        ({"type": "shared_fs", "host_path": "/x", "save_trial_best": -1}, "save_trial_best"),
    ],
)
def test_build_rejects_bad_configs_naming_the_field(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_storage_manager(config)
