"""A 300 MB checkpoint through the SDK, S3 (moto's server in its own process), the registry and
every REST download format: identical bytes, bounded server memory, exact ranges; and uploads
that fail or are killed register nothing."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tarfile
import threading
import uuid
import zipfile
from pathlib import Path

import pytest
import requests

from headway.client import Session
from headway.core import CheckpointContext, DistributedContext
from headway.core._checkpoint_registry import RESTCheckpointRegistry
from headway.storage import build_storage_manager
from registry.models import Checkpoint, Trial
from tests.helpers import REPO, TINY_CONFIG, create_experiment, free_port, wait_for
from tests.helpers_checkpoints import allow_storage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PIECE = 8 << 20
# Several files in nested folders, 300 MB and a few bytes in all (odd sizes on purpose).
SIZES = {
    "model/weights.bin": 200 * (1 << 20) + 3,
    "model/optimizer/adam/state.bin": 80 * (1 << 20) + 11,
    "extra/a/b/c/rng.bin": 20 * (1 << 20) + 1,
}
RSS_BUDGET = 100 << 20


def pieces(name: str, size: int):
    """The bytes of test file ``name``: reproducible random 8 MB pieces (cheap to regenerate)."""
    rng = random.Random(name)
    for start in range(0, size, PIECE):
        yield rng.randbytes(min(PIECE, size - start))


@pytest.fixture(scope="module")
def moto_process():
    """moto's S3 server in a process of its own, so its memory is not the web server's."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def up():
        try:
            return requests.get(url, timeout=10).status_code < 500
        except requests.RequestException:  # not listening yet, or too busy to answer in time
            return False

    try:
        wait_for(up, 30, "moto server")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def s3(moto_process, monkeypatch, settings):
    """A fresh bucket's ``checkpoint_storage`` config on the moto process (an allowed storage
    endpoint of the registry)."""
    settings.HEADWAY_STORAGE_ENDPOINTS = [moto_process]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    config = {
        "type": "s3",
        "bucket": f"big-{uuid.uuid4().hex[:8]}",
        "prefix": "exp",
        "endpoint_url": moto_process,
    }
    build_storage_manager(config)._client.create_bucket(Bucket=config["bucket"])
    return allow_storage(config)


@pytest.fixture
def trial(api, s3):
    config = TINY_CONFIG + "checkpoint_storage: " + json.dumps(s3) + "\n"
    response = create_experiment(api, config=config)
    assert response.status_code == 201, response.json()
    return Trial.objects.get(experiment_id=response.json()["id"])


def checkpoint_context(trial, live_server, token) -> CheckpointContext:
    """The SDK's checkpoint context as a single-process trial builds it (REST registry)."""
    return CheckpointContext(
        distributed=DistributedContext(
            rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
        ),
        storage_manager=build_storage_manager(trial.experiment.config["checkpoint_storage"]),
        registry=RESTCheckpointRegistry(Session(live_server.url, token), trial.id, run_id=1),
    )


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    assert match, field
    return int(match.group(1))


class PeakRSS:
    """Growth of this process's resident memory over a block, in bytes.

    The live server runs in this process (pytest-django), so this bounds the server and the
    test's own client together. The kernel's high-water mark is reset on entry
    (``/proc/self/clear_refs``); a sampling thread backs it up where that is not allowed.
    """

    def __enter__(self) -> PeakRSS:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self._hwm = True
        except OSError:
            self._hwm = False
        self.base = _status_kib("VmRSS")
        self._peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self._peak = max(self._peak, _status_kib("VmRSS"))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self._hwm:
            self._peak = max(self._peak, _status_kib("VmHWM"))
        self.growth = (self._peak - self.base) * 1024


def hash_stream(read, size: int) -> str:
    digest = hashlib.sha256()
    left = size
    while left:
        chunk = read(min(1 << 20, left))
        assert chunk, "stream ended early"
        digest.update(chunk)
        left -= len(chunk)
    return digest.hexdigest()


def test_a_300_mb_checkpoint_round_trips_through_every_path(api, trial, live_server, tmp_path):
    context = checkpoint_context(trial, live_server, api.token)
    expected: dict[str, str] = {}
    with context.store_path({"steps_completed": 7}) as (path, storage_id):
        for name, size in SIZES.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with open(path / name, "wb") as fh:
                for piece in pieces(name, size):
                    fh.write(piece)
                    digest.update(piece)
            expected[name] = digest.hexdigest()
        local_dir = path
    assert not local_dir.exists()  # the upload's temporary directory is gone
    registered = Checkpoint.objects.get(uuid=storage_id)
    assert {k: v for k, v in registered.resources.items() if k in SIZES} == SIZES
    assert set(registered.resources) == set(SIZES) | {"metadata.json"}

    with context.restore_path(storage_id) as restored:
        for name in SIZES:
            with open(restored / name, "rb") as fh:
                assert hash_stream(fh.read, SIZES[name]) == expected[name], name
        restored_dir = restored
        # A Range request answers exactly the asked bytes (across the server's 1 MiB pieces).
        url = f"{live_server.url}/api/v1/checkpoints/{storage_id}/download"
        headers = {"Authorization": f"Token {api.token}"}
        first, last = 150_000_000, 151_500_000
        part = requests.get(
            url,
            params={"path": "model/weights.bin"},
            headers={**headers, "Range": f"bytes={first}-{last}"},
            timeout=60,
        )
        assert part.status_code == 206
        with open(restored / "model/weights.bin", "rb") as fh:
            fh.seek(first)
            assert part.content == fh.read(last - first + 1)
    assert not restored_dir.exists()  # restore_path from S3 cleans up after the block

    http = requests.Session()
    http.headers["Authorization"] = f"Token {api.token}"

    def get(**params) -> requests.Response:
        response = http.get(url, params=params, stream=True, timeout=120)
        assert response.status_code == 200, response.text
        response.raw.decode_content = True
        return response

    for kind, mode in (("tar", "r|"), ("tgz", "r|gz")):
        with (
            PeakRSS() as rss,
            get(format=kind) as response,
            tarfile.open(fileobj=response.raw, mode=mode) as archive,
        ):
            got = {
                m.name: hash_stream(archive.extractfile(m).read, m.size)
                for m in archive
                if m.name in SIZES
            }
        assert got == expected, kind
        assert rss.growth < RSS_BUDGET, (kind, rss.growth)

    zipped = tmp_path / "ckpt.zip"
    with PeakRSS() as rss, get(format="zip") as response, open(zipped, "wb") as fh:
        for chunk in response.iter_content(1 << 20):
            fh.write(chunk)
    assert rss.growth < RSS_BUDGET, ("zip", rss.growth)
    assert zipped.stat().st_size == int(response.headers["Content-Length"])
    with zipfile.ZipFile(zipped) as archive:
        got = {n: hash_stream(archive.open(n).read, SIZES[n]) for n in SIZES}
    assert got == expected
    zipped.unlink()

    for name, size in SIZES.items():
        with PeakRSS() as rss, get(path=name) as response:
            assert int(response.headers["Content-Length"]) == size
            assert hash_stream(response.raw.read, size) == expected[name]
        assert rss.growth < RSS_BUDGET, (name, rss.growth)


# The child announces the first part of the multipart upload ("uploading") and every part
# then takes 2 s more (20 parts of 16 MiB, 10 at a time), as on a slow link: the parent's
# signal lands mid-upload however loaded the machine.
UPLOAD = """
import json, signal, sys, time

# SIGINT must raise KeyboardInterrupt here whatever this process inherited: a suite started
# in the background (`nohup`, `cmd &` in a script) has SIGINT ignored, and exec keeps that.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
from headway.client import Session
from headway.core import CheckpointContext, DistributedContext
from headway.core._checkpoint_registry import RESTCheckpointRegistry
from headway.storage import build_storage_manager

storage, master, token, trial_id = json.loads(sys.argv[1])
manager = build_storage_manager(storage)
announced = []


def slow_part(**_):
    if not announced:
        announced.append(True)
        print("uploading", flush=True)
    time.sleep(2.0)


manager._client.meta.events.register("before-send.s3.UploadPart", slow_part)
context = CheckpointContext(
    distributed=DistributedContext(
        rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
    ),
    storage_manager=manager,
    registry=RESTCheckpointRegistry(Session(master, token), trial_id, run_id=1),
)
with context.store_path({"steps_completed": 5}) as (path, storage_id):
    (path / "small.bin").write_bytes(b"s" * 1000)
    with open(path / "big.bin", "wb") as fh:
        for _ in range(40):
            fh.write(b"x" * (8 << 20))
    print(storage_id, flush=True)
"""


def interrupt_upload(trial, live_server, token, s3, signum) -> tuple[str, int]:
    """Run a trial-like process storing a 320 MB checkpoint on S3 (slowed to >= 4 s); send it
    ``signum`` once the multipart upload of its big file has begun. Returns ``(storage_id,
    exit status)``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", UPLOAD, json.dumps([s3, live_server.url, token, trial.id])],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    client = build_storage_manager(s3)._client
    try:
        storage_id = proc.stdout.readline().strip()
        assert proc.stdout.readline().strip() == "uploading"
        assert client.list_multipart_uploads(Bucket=s3["bucket"]).get("Uploads")
        os.kill(proc.pid, signum)
        return storage_id, proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()


def test_an_upload_interrupted_by_an_exception_registers_nothing_and_cleans_up(
    api, trial, live_server, s3
):
    # SIGINT raises KeyboardInterrupt in the process while it waits on the transfers.
    storage_id, status = interrupt_upload(trial, live_server, api.token, s3, signal.SIGINT)
    assert status != 0 and storage_id
    assert not Checkpoint.objects.filter(trial=trial).exists()
    client = build_storage_manager(s3)._client
    assert client.list_objects_v2(Bucket=s3["bucket"]).get("KeyCount") == 0
    assert not client.list_multipart_uploads(Bucket=s3["bucket"]).get("Uploads")


def test_a_trial_process_killed_mid_upload_registers_nothing(api, trial, live_server, s3):
    storage_id, status = interrupt_upload(trial, live_server, api.token, s3, signal.SIGKILL)
    assert status == -signal.SIGKILL and storage_id
    # Whatever reached the bucket is an orphan for the registry's GC; no checkpoint is listed.
    assert not Checkpoint.objects.filter(trial=trial).exists()
    assert not Checkpoint.objects.filter(uuid=storage_id).exists()


def test_restore_path_removes_its_directory_when_the_block_raises(api, trial, live_server):
    context = checkpoint_context(trial, live_server, api.token)
    with context.store_path({"steps_completed": 1}) as (path, storage_id):
        (path / "w.bin").write_bytes(b"w" * 10)
    with pytest.raises(RuntimeError, match="boom"), context.restore_path(storage_id) as restored:
        assert (restored / "w.bin").read_bytes() == b"w" * 10
        kept = restored
        raise RuntimeError("boom")
    assert not kept.exists()
