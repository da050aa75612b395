"""Checkpoint uploads and downloads ride out a storage outage (HEADWAY_STORAGE_RETRY_SECONDS);
permanent errors fail at once.

S3: moto's real server behind a TCP proxy that refuses connections (a stopped endpoint) until
Headway has logged a retry of the whole transfer, then listens again on the same port.
"""

from __future__ import annotations

import errno
import logging
import os
import pathlib
import shutil
import threading
import urllib.parse
from collections.abc import Iterator

import pytest

from headway.storage import (
    S3StorageManager,
    SharedFSStorageManager,
    _s3_client,
    build_storage_manager,
)
from headway.storage._base import MARKER_FILE
from headway.storage._retry import storage_retry_seconds
from tests.headway.storage.outage_proxy import OutageProxy

SID = "0b5d3c1e-2222-4c52-8d5e-5a1f7a3a2f10"
BIG = os.urandom(20 << 20)  # over the 16 MiB multipart threshold: a multipart transfer


class _RetryLogged(logging.Handler):
    """Brings the storage back when Headway logs its first retry of a whole transfer."""

    def __init__(self, proxy: OutageProxy) -> None:
        super().__init__(logging.WARNING)
        self.proxy = proxy
        self.retries: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "retrying in" in message:
            self.retries.append(message)
            self.proxy.up()


@pytest.fixture
def outage(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[OutageProxy]:
    # botocore's own retries made short, so the outage outlasts them as a minute-long one does.
    monkeypatch.setattr(_s3_client, "_BOTO_RETRIES", {"mode": "standard", "max_attempts": 2})
    monkeypatch.setenv("HEADWAY_STORAGE_RETRY_SECONDS", "120")
    target = urllib.parse.urlsplit(s3_endpoint)
    proxy = OutageProxy((target.hostname or "", target.port or 0), start_down=True)
    yield proxy
    proxy.close()


@pytest.fixture
def retry_log(outage: OutageProxy) -> Iterator[_RetryLogged]:
    handler = _RetryLogged(outage)
    logger = logging.getLogger("headway.storage")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def _manager(endpoint: str, bucket: str) -> S3StorageManager:
    mgr = build_storage_manager({"type": "s3", "bucket": bucket, "endpoint_url": endpoint})
    assert isinstance(mgr, S3StorageManager)
    return mgr


def test_s3_upload_rides_out_an_outage_and_stores_the_checkpoint_once(
    s3_endpoint: str, outage: OutageProxy, retry_log: _RetryLogged
) -> None:
    direct = _manager(s3_endpoint, "outage-up")
    direct._client.create_bucket(Bucket="outage-up")
    with _manager(outage.url, "outage-up").store_path(SID) as path:
        (path / "model.pt").write_bytes(BIG)
        (path / "meta.json").write_text("{}")
    assert retry_log.retries and f"upload of checkpoint {SID}" in retry_log.retries[0]
    assert "attempt 1" in retry_log.retries[0]
    keys = [o["Key"] for o in direct._client.list_objects_v2(Bucket="outage-up")["Contents"]]
    assert sorted(keys) == [f"{SID}/{MARKER_FILE}", f"{SID}/meta.json", f"{SID}/model.pt"]
    with direct.open_file(SID, "model.pt") as fh:
        assert fh.read() == BIG
    uploads = direct._client.list_multipart_uploads(Bucket="outage-up").get("Uploads", [])
    assert [u for u in uploads if u["Key"].startswith(SID)] == []


def test_s3_upload_survives_the_endpoint_going_down_mid_transfer(
    s3_endpoint: str, outage: OutageProxy, retry_log: _RetryLogged
) -> None:
    direct = _manager(s3_endpoint, "outage-mid")
    direct._client.create_bucket(Bucket="outage-mid")
    outage.up()
    manager = _manager(outage.url, "outage-mid")
    # The endpoint goes down as the first part of the big file is being sent.
    original = manager._client.upload_part
    once = threading.Event()

    def upload_part_then_outage(**kwargs: object) -> object:
        if not once.is_set():
            once.set()
            outage.down()
        return original(**kwargs)

    manager._client.upload_part = upload_part_then_outage  # type: ignore[method-assign]
    try:
        with manager.store_path(SID) as path:
            (path / "model.pt").write_bytes(BIG)
    finally:
        del manager._client.upload_part
    assert once.is_set() and retry_log.retries
    with direct.restore_path(SID) as restored:
        assert (restored / "model.pt").read_bytes() == BIG
    assert direct.list_files(SID) == {"model.pt": len(BIG)}


def test_s3_download_rides_out_an_outage(
    s3_endpoint: str, outage: OutageProxy, retry_log: _RetryLogged
) -> None:
    direct = _manager(s3_endpoint, "outage-down")
    direct._client.create_bucket(Bucket="outage-down")
    with direct.store_path(SID) as path:
        (path / "model.pt").write_bytes(BIG)
        (path / "sub").mkdir()
        (path / "sub" / "x.txt").write_text("x")
    with _manager(outage.url, "outage-down").restore_path(SID) as restored:
        assert (restored / "model.pt").read_bytes() == BIG
        assert (restored / "sub" / "x.txt").read_text() == "x"
    assert retry_log.retries and f"download of checkpoint {SID}" in retry_log.retries[0]


def test_s3_missing_bucket_fails_at_once_without_retries(
    s3_endpoint: str, outage: OutageProxy, retry_log: _RetryLogged
) -> None:
    outage.up()
    manager = _manager(outage.url, "no-such-bucket")
    with pytest.raises(Exception, match="NoSuchBucket"), manager.store_path(SID) as path:
        (path / "w").write_bytes(b"w")
    assert retry_log.retries == []


def test_shared_fs_sync_retries_a_stale_handle(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An NFS server failing over answers ESTALE for a moment; fsync is where a write meets it.
    failures = [errno.ESTALE, errno.EIO]
    real_fsync = os.fsync
    lock = threading.Lock()

    def flaky_fsync(fd: int) -> None:
        with lock:
            code = failures.pop(0) if failures else None
        if code is not None:
            raise OSError(code, os.strerror(code))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", flaky_fsync)
    manager = SharedFSStorageManager(tmp_path / "ckpts")
    with caplog.at_level(logging.WARNING, "headway.storage"), manager.store_path(SID) as path:
        (path / "w.bin").write_bytes(b"weights")
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 2 and "attempt 2" in retries[1]
    assert manager.list_files(SID) == {"w.bin": 7}
    assert manager.read_marker(SID) is not None


def test_shared_fs_permanent_error_fails_at_once(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    manager = SharedFSStorageManager(tmp_path / "a-file" / "ckpts")
    caplog.set_level(logging.WARNING, "headway.storage")
    with pytest.raises(OSError) as raised, manager.store_path(SID):
        pass
    assert raised.value.errno in (errno.ENOTDIR, errno.EEXIST)
    assert not [r for r in caplog.records if "retrying in" in r.getMessage()]


def test_retry_budget_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADWAY_STORAGE_RETRY_SECONDS", raising=False)
    assert storage_retry_seconds() >= 60
    monkeypatch.setenv("HEADWAY_STORAGE_RETRY_SECONDS", "0")
    assert storage_retry_seconds() == 0
    monkeypatch.setenv("HEADWAY_STORAGE_RETRY_SECONDS", "soon")
    with pytest.raises(ValueError, match="HEADWAY_STORAGE_RETRY_SECONDS"):
        storage_retry_seconds()


def test_checkpoint_download_retries_a_stale_handle(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from headway import core

    with core.init(checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        source = tmp_path / "src"
        source.mkdir()
        (source / "w.bin").write_bytes(b"weights")
        storage_id = ctx.checkpoint.upload(source, {"steps_completed": 1})
        real_copyfile = shutil.copyfile
        failures = [errno.ESTALE]

        def flaky_copyfile(src: str, dst: str, **kwargs: object) -> object:
            if failures:
                code = failures.pop()
                raise OSError(code, os.strerror(code), src)
            return real_copyfile(src, dst, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(shutil, "copyfile", flaky_copyfile)
        ctx.checkpoint.download(storage_id, tmp_path / "out")
    assert failures == []
    assert (tmp_path / "out" / "w.bin").read_bytes() == b"weights"
