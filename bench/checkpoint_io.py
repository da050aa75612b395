"""Checkpoint I/O: MB/s of storing and restoring a checkpoint through Headway vs plain tools.

Run from the repository root: ``.venv/bin/python bench/checkpoint_io.py [--size-mb 1024]``
(``make bench``).

The checkpoint is ``--size-mb`` MB of random bytes in four files in nested folders (50 / 30 / 15
/ 5 %), generated once into a source directory; every path below moves those same bytes, with
the page cache warm and ``sync`` before each timed step. S3 is moto's server in a process of its
own on loopback; the registry is a ``runserver`` subprocess (SQLite, fresh database).

- S3 upload: the SDK's ``CheckpointContext.store_path`` (files hard-linked into its directory,
  timed from the end of the ``with`` body until the checkpoint is registered: managed transfer,
  metadata, registration) vs boto3 ``upload_file`` of each file, one after the other, to the same
  endpoint. Target >= 0.9x.
- S3 download: ``restore_path`` (until the files are in its temporary directory) vs boto3
  ``download_file`` of each file. Target >= 0.9x.
- shared_fs: ``store_path`` with the files copied in (``shutil.copyfile``) plus registration vs
  ``cp -r``; ``CheckpointContext.download`` into a new directory vs ``cp -r``. Target >= 0.8x.
  (``restore_path`` on shared_fs yields the stored directory itself: no copy at all.)
- REST: ``GET checkpoints/{uuid}/download`` (tar, zip) written to a file, and ``headway checkpoint
  download`` (per-file, resumable) vs the boto3 download above. Target >= 0.8x.

Each step runs ``--repeat`` times, alternating with its baseline; figures are the best run of
each (least disturbed by the shared machine). The last line printed is a JSON object whose
``*_ratio`` keys are Headway's speed over the baseline's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import REPO, Backend, Server, free_port, single_file_model_definition  # noqa: E402

SHARES = {
    "model/weights.bin": 0.50,
    "model/optimizer/state.bin": 0.30,
    "extra/ema/weights.bin": 0.15,
    "extra/a/b/rng.bin": 0.05,
}
PIECE = 8 << 20
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def make_source(root: Path, size_mb: int) -> dict[str, int]:
    """Write the checkpoint's files under ``root``; return ``{relpath: bytes}``."""
    sizes = {}
    for rel, share in SHARES.items():
        size = max(1, int(size_mb * (1 << 20) * share))
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            for start in range(0, size, PIECE):
                fh.write(os.urandom(min(PIECE, size - start)))
        sizes[rel] = size
    return sizes


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's S3 server as a subprocess; yields its endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(url, timeout=1).status_code < 500:
                    break
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def create_trial(url: str, token: str, storage: dict[str, Any]) -> int:
    """A single-trial experiment whose checkpoints go to ``storage``; returns the trial id."""
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    config = {
        "name": "checkpoint-io-bench",
        "entrypoint": "python noop.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "checkpoint_storage": storage,
    }
    model = single_file_model_definition("noop.py", "pass\n")
    answer = http.post(
        f"{url}/api/v1/experiments/", json={"config": config, "model_definition": model}
    )
    answer.raise_for_status()
    trials = http.get(f"{url}/api/v1/experiments/{answer.json()['id']}/trials/").json()
    return int(trials["results"][0]["id"])


def checkpoint_context(url: str, token: str, trial_id: int, storage: dict[str, Any]):
    from headway.client import Session
    from headway.core import CheckpointContext, DistributedContext
    from headway.core._checkpoint import RESTCheckpointRegistry
    from headway.storage import build_storage_manager

    return CheckpointContext(
        distributed=DistributedContext(
            rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
        ),
        storage_manager=build_storage_manager(storage),
        registry=RESTCheckpointRegistry(Session(url, token), trial_id, run_id=1),
    )


def timed(step: Callable[[], Any]) -> float:
    """Seconds ``step()`` took, after flushing dirty pages so earlier writes do not bill it."""
    os.sync()
    began = time.perf_counter()
    step()
    return time.perf_counter() - began


def store(context, sizes: dict[str, int], source: Path, put: Callable[[Path, Path], object]):
    """Store a checkpoint with the SDK; returns ``(began, placed, done, storage_id)``:
    ``perf_counter`` times before the files are placed, after, and after registration.

    ``put(src, dst)`` places each file in the ``store_path`` directory (not timed for S3, where
    the timed part is the upload on exit; timed for shared_fs, where it is the write itself)."""
    manager = context.store_path({"steps_completed": 1})
    path, storage_id = manager.__enter__()
    os.sync()
    began = time.perf_counter()
    for rel in sizes:
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        put(source / rel, path / rel)
    placed = time.perf_counter()
    manager.__exit__(None, None, None)
    return began, placed, time.perf_counter(), storage_id


def best(values: list[float]) -> float:
    return min(values)


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import boto3

    source = work / "source"
    sizes = make_source(source, args.size_mb)
    total_mb = sum(sizes.values()) / (1 << 20)
    os.environ.update(AWS_ENV)
    backend = Backend.sqlite()
    out: dict[str, list[float]] = {}

    def record(key: str, seconds: float) -> None:
        out.setdefault(key, []).append(seconds)

    try:
        token = backend.prepare()
        with moto_server() as endpoint, Server(backend) as server:
            s3 = {"type": "s3", "bucket": "bench", "prefix": "ckpt", "endpoint_url": endpoint}
            client = boto3.client("s3", endpoint_url=endpoint)
            client.create_bucket(Bucket="bench")
            fs = {"type": "shared_fs", "host_path": str(work / "shared")}
            s3_ctx = checkpoint_context(server.url, token, create_trial(server.url, token, s3), s3)
            fs_ctx = checkpoint_context(server.url, token, create_trial(server.url, token, fs), fs)
            http = requests.Session()
            http.headers["Authorization"] = f"Token {token}"

            def one_round() -> None:
                # S3 upload: SDK vs boto3.
                _, placed, done, storage_id = store(s3_ctx, sizes, source, os.link)
                record("s3_upload", done - placed)
                plain = f"plain-{uuid.uuid4()}"

                def boto3_upload() -> None:
                    for rel in sizes:
                        client.upload_file(str(source / rel), "bench", f"{plain}/{rel}")

                record("boto3_upload", timed(boto3_upload))
                # S3 download: SDK restore_path vs boto3.
                restore = s3_ctx.restore_path(storage_id)
                record("s3_download", timed(restore.__enter__))
                restore.__exit__(None, None, None)
                target = work / "boto3-download"

                def boto3_download() -> None:
                    for rel in sizes:
                        (target / rel).parent.mkdir(parents=True, exist_ok=True)
                        client.download_file("bench", f"{plain}/{rel}", str(target / rel))

                record("boto3_download", timed(boto3_download))
                shutil.rmtree(target)

                def boto3_stream() -> None:  # one plain GET per file, what the server does
                    for rel in sizes:
                        (target / rel).parent.mkdir(parents=True, exist_ok=True)
                        body = client.get_object(Bucket="bench", Key=f"{plain}/{rel}")["Body"]
                        with open(target / rel, "wb") as fh:
                            for chunk in body.iter_chunks(1 << 20):
                                fh.write(chunk)

                record("boto3_stream", timed(boto3_stream))
                shutil.rmtree(target)
                # REST downloads of the S3 checkpoint.
                url = f"{server.url}/api/v1/checkpoints/{storage_id}/download"
                record("rest_tar", timed(lambda: save(http, url, "tar", work / "a")))
                record("rest_zip", timed(lambda: save(http, url, "zip", work / "a")))
                (work / "a").unlink()
                record(
                    "cli_files", timed(lambda: cli_download(server.url, token, storage_id, work))
                )
                shutil.rmtree(work / "cli")
                s3_ctx.storage_manager.delete(storage_id)
                # shared_fs: SDK vs cp.
                began, _, done, fs_id = store(fs_ctx, sizes, source, shutil.copyfile)
                record("fs_upload", done - began)
                record("cp_upload", timed(lambda: cp(source, work / "cp")))
                shutil.rmtree(work / "cp")
                record("fs_download", timed(lambda: fs_ctx.download(fs_id, work / "fs-out")))
                shutil.rmtree(work / "fs-out")
                stored = Path(fs["host_path"]) / fs_id
                record("cp_download", timed(lambda: cp(stored, work / "cp")))
                shutil.rmtree(work / "cp")
                fs_ctx.storage_manager.delete(fs_id)

            for _ in range(args.repeat):
                one_round()
            assert server.proc is not None
            server_hwm_kib = peak_rss_kib(server.proc.pid)
    finally:
        backend.cleanup()
    rate = {key: round(total_mb / best(values), 1) for key, values in out.items()}
    figures: dict[str, Any] = {
        "size_mb": round(total_mb, 1),
        "files": len(sizes),
        "server_peak_rss_mb": round(server_hwm_kib / 1024, 1),
    }
    figures.update({f"{key}_mb_s": value for key, value in sorted(rate.items())})
    figures.update(
        {
            "s3_upload_vs_boto3_ratio": round(rate["s3_upload"] / rate["boto3_upload"], 3),
            "s3_download_vs_boto3_ratio": round(rate["s3_download"] / rate["boto3_download"], 3),
            "shared_fs_upload_vs_cp_ratio": round(rate["fs_upload"] / rate["cp_upload"], 3),
            "shared_fs_download_vs_cp_ratio": round(rate["fs_download"] / rate["cp_download"], 3),
            "rest_tar_vs_boto3_download_ratio": round(rate["rest_tar"] / rate["boto3_download"], 3),
            "rest_tar_vs_boto3_stream_ratio": round(rate["rest_tar"] / rate["boto3_stream"], 3),
            "rest_zip_vs_boto3_download_ratio": round(rate["rest_zip"] / rate["boto3_download"], 3),
            "cli_files_vs_boto3_download_ratio": round(
                rate["cli_files"] / rate["boto3_download"], 3
            ),
        }
    )
    return figures


def peak_rss_kib(pid: int) -> int:
    """The peak resident memory (``VmHWM``) of process ``pid``, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for process {pid}")


def save(http: requests.Session, url: str, kind: str, target: Path) -> None:
    """``GET url?format=kind`` streamed into ``target``."""
    with http.get(url, params={"format": kind}, stream=True, timeout=600) as response:
        response.raise_for_status()
        with open(target, "wb") as fh:
            for chunk in response.iter_content(1 << 20):
                fh.write(chunk)


def cli_download(url: str, token: str, storage_id: str, work: Path) -> None:
    """``headway checkpoint download UUID -o work/cli`` as a user runs it."""
    subprocess.run(
        [sys.executable, "-m", "headway.cli", "checkpoint", "download", storage_id]
        + ["-o", str(work / "cli"), "--no-progress"],
        env={**os.environ, "HEADWAY_MASTER": url, "HEADWAY_TOKEN": token},
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def cp(src: Path, dst: Path) -> None:
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="checkpoint size in MB")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each step (best kept)")
    args = parser.parse_args()
    if args.size_mb < 1 or args.repeat < 1:
        parser.error("--size-mb and --repeat must be at least 1")
    with tempfile.TemporaryDirectory(prefix="headway-ckpt-bench-") as tmp:
        figures = measure(args, Path(tmp))
    print(f"{figures['size_mb']} MB checkpoint, {figures['files']} files (best of {args.repeat}):")
    for key in ("s3_upload", "s3_download", "fs_upload", "fs_download"):
        print(f"  {key:12s} {figures[key + '_mb_s']:8.1f} MB/s")
    for key in ("boto3_upload", "boto3_download", "boto3_stream", "cp_upload", "cp_download"):
        print(f"  {key:12s} {figures[key + '_mb_s']:8.1f} MB/s (baseline)")
    for key in ("rest_tar", "rest_zip", "cli_files"):
        print(f"  {key:12s} {figures[key + '_mb_s']:8.1f} MB/s (REST)")
    print(f"  web server peak RSS {figures['server_peak_rss_mb']} MB (whole run)")
    for key, value in figures.items():
        if key.endswith("_ratio"):
            print(f"  {key}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
