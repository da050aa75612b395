"""A shared_fs checkpoint is on disk before it can be registered.

``SharedFSStorageManager.store_path`` fsyncs, on normal exit, every file and folder the block
wrote, the checkpoint's folder, its marker and the storage root (whose entries name both), and
nothing when the block raises (the partial checkpoint is deleted instead). The fsync calls are
recorded by wrapping ``os.fsync`` (the kernel's, not a Headway component): each fd is resolved
to its path through ``/proc/self/fd``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from headway.storage import SharedFSStorageManager


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths fsynced while the test runs, in order."""
    paths: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return paths


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_store_path_fsyncs_every_file_and_folder_before_it_returns(tmp_path, synced):
    manager = SharedFSStorageManager(tmp_path / "ckpts")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not part of the checkpoint")
    with manager.store_path("ckpt-1") as path:
        (path / "model").mkdir()
        (path / "model" / "weights.bin").write_bytes(os.urandom(1 << 16))
        (path / "a" / "b").mkdir(parents=True)
        for index in range(20):  # several files: the concurrent fsyncs
            (path / "a" / "b" / f"shard-{index}.bin").write_bytes(b"x" * index)
        (path / "link").symlink_to(outside)  # a link is neither followed nor synced
        assert synced == []  # nothing before the block ends
    root = manager.base_path / "ckpt-1"
    files = {str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink()}
    folders = {str(root), str(root / "model"), str(root / "a"), str(root / "a" / "b")}
    expected = files | folders | {str(manager.marker_path("ckpt-1")), str(manager.base_path)}
    assert set(synced) == expected
    assert len(synced) == len(expected)  # each once
    assert str(outside) not in synced
    # Folders after the files in them, deepest first; the storage root last.
    assert synced.index(str(root / "a" / "b")) > max(
        synced.index(f) for f in files if f.startswith(str(root / "a" / "b"))
    )
    assert synced.index(str(root / "a")) > synced.index(str(root / "a" / "b"))
    assert synced[-1] == str(manager.base_path)


def test_a_failed_block_syncs_nothing_and_leaves_nothing(tmp_path, synced):
    manager = SharedFSStorageManager(tmp_path / "ckpts")
    with pytest.raises(RuntimeError, match="boom"), manager.store_path("ckpt-2") as path:
        (path / "half.bin").write_bytes(b"half")
        raise RuntimeError("boom")
    assert synced == []
    assert not manager.exists("ckpt-2")
    assert not manager.marker_path("ckpt-2").exists()
