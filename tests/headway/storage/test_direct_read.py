"""Reading a checkpoint straight from shared_fs storage (headway.storage._direct): what is refused
and why, resumed copies, links leaving the checkpoint, and the copy without ``sendfile``."""

from __future__ import annotations

import errno
import os
import uuid

import pytest

from headway.storage import DirectReadUnavailable, copy_direct, direct_reader


@pytest.fixture
def stored(tmp_path):
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "storage")}
    storage_id = str(uuid.uuid4())
    folder = tmp_path / "storage" / storage_id
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "weights.bin").write_bytes(os.urandom(300_000))
    checkpoint = {"uuid": storage_id, "state": "COMPLETED", "storage": storage}
    return checkpoint, folder


def test_a_resumed_copy_appends_the_rest(stored, tmp_path):
    checkpoint, folder = stored
    data = (folder / "sub" / "weights.bin").read_bytes()
    target = tmp_path / "out.bin"
    target.write_bytes(data[:1234])
    pieces: list[int] = []
    copy_direct(
        direct_reader(checkpoint), checkpoint["uuid"], "sub/weights.bin", target, pieces.append
    )
    assert target.read_bytes() == data
    assert sum(pieces) == len(data) - 1234


def test_without_sendfile_between_files_it_reads_and_writes(stored, tmp_path, monkeypatch):
    checkpoint, folder = stored

    def no_file_to_file_sendfile(*args):
        raise OSError(errno.EINVAL, "Invalid argument")  # what a kernel without it answers

    monkeypatch.setattr(os, "sendfile", no_file_to_file_sendfile)
    target = tmp_path / "out.bin"
    copy_direct(direct_reader(checkpoint), checkpoint["uuid"], "sub/weights.bin", target)
    assert target.read_bytes() == (folder / "sub" / "weights.bin").read_bytes()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"state": "DELETED"}, "is DELETED"),
        ({"storage": {"type": "s3", "bucket": "b"}}, "s3 storage"),
        ({"storage": {"type": "shared_fs"}}, "host_path is required"),
        ({"storage": {"type": "shared_fs", "host_path": "/nonexistent/mount"}}, "not mounted"),
    ],
)
def test_what_cannot_be_read_here_says_why(stored, change, why):
    checkpoint, _ = stored
    with pytest.raises(DirectReadUnavailable, match=why):
        direct_reader({**checkpoint, **change})


def test_a_link_leaving_the_checkpoint_is_not_followed(stored, tmp_path):
    checkpoint, folder = stored
    secret = tmp_path / "secret.txt"
    secret.write_text("not the checkpoint's")
    (folder / "link.txt").symlink_to(secret)
    target = tmp_path / "out.txt"
    with pytest.raises(DirectReadUnavailable, match=r"link\.txt"):
        copy_direct(direct_reader(checkpoint), checkpoint["uuid"], "link.txt", target)
    assert not target.exists()
