"""Checkpoint I/O: every path that stores or restores a checkpoint vs the plain tool, paired.

Run from the repository root: ``.venv/bin/python bench/checkpoint_io.py [--sizes-mb 10,100,1024]``
(``make bench``; ``HEADWAY_BENCH_TINY=1``: one 4 MB checkpoint, 2 rounds, no 1 GB row).

Each checkpoint is ``size`` MB of random bytes in four files in nested folders (50 / 30 / 15 /
5 %), generated once per size; every path moves those same bytes with the page cache warm and
``sync`` before each timed step. S3 is moto's server on loopback, in a process of its own; the
registry is Headway's web server as ``manage.py serve`` runs it (gunicorn with
config/gunicorn.py), on the embedded SQLite, or on PostgreSQL when ``DATABASE_URL`` names one.
The bench names its own bucket and folder as the server's storage locations.

Paths (Headway, then the baseline it is paired with):

- ``s3_store``: ``CheckpointContext.store_path`` (files hard-linked in, untimed; timed from the
  end of the ``with`` body until the checkpoint is registered) vs boto3 ``upload_file`` of each
  file.
- ``s3_restore``: ``CheckpointContext.restore_path`` vs boto3 ``download_file`` of each file.
- ``fs_store``: ``store_path`` on shared_fs, files copied in with ``shutil.copyfile``, plus
  registration, vs ``cp -r``; ``fs_download``: ``CheckpointContext.download`` vs ``cp -r``.
- ``rest_tar`` / ``rest_zip``: ``GET checkpoints/{uuid}/download?format=`` of the S3 checkpoint
  into a file vs boto3 ``download_file`` of each file.
- ``cli``: ``headway checkpoint download`` (a process) vs a process that downloads the same files
  with boto3 (``python -c``): both pay an interpreter start.

Each round runs every pair, its two sides in alternating order (interleaved pairs, so drift in
the machine's load hits both alike). A row gives the median MB/s of each side, the median of the
per-pair ratios (Headway / baseline: above 1 is faster) with its range, and the CPU seconds of
each side (this process, its children and the web server; moto's excluded). The web server's
RSS is reported at rest (before any download) and its growth while streaming the largest
checkpoint as tar and zip. The last line printed is one JSON object of all figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import REPO, Backend, Server, free_port, single_file_model_definition  # noqa: E402
from _tiny import tiny  # noqa: E402

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
BUCKET = "bench"
# (Headway path, its baseline): the rows of the report, in the order each round runs them.
PAIRS = (
    ("s3_store", "boto3_upload"),
    ("s3_restore", "boto3_download"),
    ("fs_store", "cp_store"),
    ("fs_download", "cp_download"),
    ("rest_tar", "boto3_download"),
    ("rest_zip", "boto3_download"),
    ("cli", "boto3_process"),
)
_BOTO3_PROCESS = """
import sys, boto3
from pathlib import Path
endpoint, prefix, target, *rels = sys.argv[1:]
client = boto3.client("s3", endpoint_url=endpoint)
for rel in rels:
    (Path(target) / rel).parent.mkdir(parents=True, exist_ok=True)
    client.download_file("bench", f"{prefix}/{rel}", str(Path(target) / rel))
"""


def make_source(root: Path, size_mb: float) -> dict[str, int]:
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
    """moto's S3 server as a subprocess; yields its endpoint URL (the process is ended after)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            # Not listening yet, or too busy to answer within the timeout on a loaded machine.
            with contextlib.suppress(requests.RequestException):
                if requests.get(url, timeout=10).status_code < 500:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"moto's S3 server did not answer at {url}")
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


def checkpoint_context(url: str, token: str, trial_id: int, storage: dict[str, Any]) -> Any:
    """The SDK's ``CheckpointContext`` of a trial process (rank 0 of 1) writing to ``storage``."""
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


class Meter:
    """Wall and CPU seconds of one timed step (CPU: this process, reaped children, the server).

    ``start()`` syncs dirty pages first, so earlier writes do not bill the step."""

    def __init__(self, server: psutil.Process) -> None:
        self.server = server
        self.wall = self.cpu = 0.0

    def _cpu(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
        for proc in [self.server, *self.server.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = proc.cpu_times()
                total += times.user + times.system
        return total

    def start(self) -> None:
        os.sync()
        self._cpu0, self._wall0 = self._cpu(), time.perf_counter()

    def stop(self) -> Meter:
        self.wall = time.perf_counter() - self._wall0
        self.cpu = self._cpu() - self._cpu0
        return self


class RSSWatch:
    """The largest RSS growth of any of the server's processes while the block runs (sampled
    every 10 ms from ``/proc``, the resting size taken at entry), in bytes."""

    def __init__(self, server: psutil.Process) -> None:
        self.procs = [server, *server.children(recursive=True)]
        self.growth = 0
        self._stop = threading.Event()

    def _rss(self) -> list[int]:
        return [proc.memory_info().rss for proc in self.procs]

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            now = self._rss()
            self.growth = max(self.growth, *(n - r for n, r in zip(now, self.rest, strict=True)))

    def __enter__(self) -> RSSWatch:
        self.rest = self._rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Paths:
    """The timed steps of one checkpoint size: each returns a stopped ``Meter``."""

    def __init__(self, env: dict[str, Any], work: Path, size_mb: float) -> None:
        self.env, self.work = env, work
        self.source = work / f"source-{size_mb}"
        self.sizes = make_source(self.source, size_mb)
        self.client = env["client"]
        self.plain = f"plain-{uuid.uuid4()}"  # the baselines' copy in the bucket
        for rel in self.sizes:
            self.client.upload_file(str(self.source / rel), BUCKET, f"{self.plain}/{rel}")
        # One stored checkpoint of each storage for the download paths.
        self.s3_id = self._store(env["s3_ctx"], os.link)[1]
        self.fs_id = self._store(env["fs_ctx"], shutil.copyfile)[1]

    def meter(self) -> Meter:
        return Meter(self.env["server"])

    def out(self, name: str) -> Path:
        """A fresh (removed) output path under the work folder."""
        path = self.work / name
        if path.is_dir():
            shutil.rmtree(path)
        path.unlink(missing_ok=True)
        return path

    def _store(self, context: Any, put: Callable[[Path, Path], object]) -> tuple[Meter, str]:
        """Store a checkpoint: ``put`` places each file (timed for shared_fs, where it is the
        write itself; ``os.link`` for S3, where the timed part is the upload on exit)."""
        meter = self.meter()
        with context.store_path({"steps_completed": 1}) as (path, storage_id):
            if put is not os.link:
                meter.start()
            for rel in self.sizes:
                (path / rel).parent.mkdir(parents=True, exist_ok=True)
                put(self.source / rel, path / rel)
            if put is os.link:
                meter.start()
        return meter.stop(), storage_id

    def s3_store(self) -> Meter:
        meter, storage_id = self._store(self.env["s3_ctx"], os.link)
        self.env["s3_ctx"].storage_manager.delete(storage_id)
        return meter

    def boto3_upload(self) -> Meter:
        meter, key = self.meter(), f"up-{uuid.uuid4()}"
        meter.start()
        for rel in self.sizes:
            self.client.upload_file(str(self.source / rel), BUCKET, f"{key}/{rel}")
        meter.stop()
        for rel in self.sizes:
            self.client.delete_object(Bucket=BUCKET, Key=f"{key}/{rel}")
        return meter

    def s3_restore(self) -> Meter:
        meter = self.meter()
        meter.start()
        with self.env["s3_ctx"].restore_path(self.s3_id):
            meter.stop()
        return meter

    def boto3_download(self) -> Meter:
        target, meter = self.out("boto3"), self.meter()
        meter.start()
        for rel in self.sizes:
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            self.client.download_file(BUCKET, f"{self.plain}/{rel}", str(target / rel))
        return meter.stop()

    def fs_store(self) -> Meter:
        meter, storage_id = self._store(self.env["fs_ctx"], shutil.copyfile)
        self.env["fs_ctx"].storage_manager.delete(storage_id)
        return meter

    def cp_store(self) -> Meter:
        return self._cp(self.source, self.out("cp"))

    def fs_download(self) -> Meter:
        target, meter = self.out("fs-out"), self.meter()
        meter.start()
        self.env["fs_ctx"].download(self.fs_id, target)
        return meter.stop()

    def cp_download(self) -> Meter:
        return self._cp(Path(self.env["fs"]["host_path"]) / self.fs_id, self.out("cp"))

    def _cp(self, src: Path, dst: Path) -> Meter:
        meter = self.meter()
        meter.start()
        subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
        return meter.stop()

    def rest_tar(self) -> Meter:
        return self._rest("tar")

    def rest_zip(self) -> Meter:
        return self._rest("zip")

    def _rest(self, kind: str) -> Meter:
        target, meter = self.out("rest"), self.meter()
        url = f"{self.env['url']}/api/v1/checkpoints/{self.s3_id}/download"
        meter.start()
        with self.env["http"].get(url, params={"format": kind}, stream=True) as response:
            response.raise_for_status()
            with open(target, "wb") as fh:
                for chunk in response.iter_content(1 << 20):
                    fh.write(chunk)
        return meter.stop()

    def cli(self) -> Meter:
        """``headway checkpoint download UUID -o DIR`` as a user runs it."""
        target, meter = self.out("cli"), self.meter()
        env = {**os.environ, "HEADWAY_MASTER": self.env["url"], "HEADWAY_TOKEN": self.env["token"]}
        command = [sys.executable, "-m", "headway.cli", "checkpoint", "download", self.s3_id]
        meter.start()
        subprocess.run(
            [*command, "-o", str(target), "--no-progress"],
            env=env,
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return meter.stop()

    def boto3_process(self) -> Meter:
        target, meter = self.out("boto3-process"), self.meter()
        meter.start()
        subprocess.run(
            [sys.executable, "-c", _BOTO3_PROCESS, self.env["endpoint"], self.plain, str(target)]
            + list(self.sizes),
            check=True,
        )
        return meter.stop()


def measure_size(paths: Paths, rounds: int) -> dict[str, Any]:
    """``rounds`` rounds of every pair of ``PAIRS`` (sides alternating); the figures of each."""
    total_mb = sum(paths.sizes.values()) / (1 << 20)
    runs: dict[str, list[tuple[Meter, Meter]]] = {name: [] for name, _ in PAIRS}
    for round_no in range(rounds):
        for name, base in PAIRS:
            sides = [getattr(paths, name), getattr(paths, base)]
            if round_no % 2:
                second, first = sides[1](), sides[0]()
            else:
                first, second = sides[0](), sides[1]()
            runs[name].append((first, second))
    rows: dict[str, Any] = {}
    for name, base in PAIRS:
        ratios = [b.wall / h.wall for h, b in runs[name]]
        rows[name] = {
            "baseline": base,
            "mb_s": round(total_mb / statistics.median(h.wall for h, _ in runs[name]), 1),
            "baseline_mb_s": round(total_mb / statistics.median(b.wall for _, b in runs[name]), 1),
            "ratio": round(statistics.median(ratios), 3),
            "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
            "cpu_s": round(statistics.median(h.cpu for h, _ in runs[name]), 3),
            "baseline_cpu_s": round(statistics.median(b.cpu for _, b in runs[name]), 3),
        }
    return rows


def server_rss(paths: Paths, server: psutil.Process) -> dict[str, float]:
    """The server's resting RSS (MB, its largest process) and its growth (MB) while streaming
    the checkpoint once as tar and once as zip."""
    growth = {}
    for kind in ("tar", "zip"):
        with RSSWatch(server) as watch:
            paths._rest(kind)
        growth[kind] = watch.growth / (1 << 20)
    return {
        "server_rss_resting_mb": round(max(watch.rest) / (1 << 20), 1),
        "server_rss_growth_tar_mb": round(growth["tar"], 1),
        "server_rss_growth_zip_mb": round(growth["zip"], 1),
    }


def measure(sizes_mb: list[float], rounds: int, work: Path) -> dict[str, Any]:
    """Start moto and the server, then measure every size; returns the JSON line's object."""
    import boto3

    os.environ.update(AWS_ENV)
    backend = Backend.from_environment("headway_bench_ckpt")
    figures: dict[str, Any] = {"backend": backend.label, "rounds": rounds, "sizes": {}}
    try:
        token = backend.prepare()
        with moto_server() as endpoint:
            s3 = {"type": "s3", "bucket": BUCKET, "prefix": "ckpt", "endpoint_url": endpoint}
            fs = {"type": "shared_fs", "host_path": str(work / "shared")}
            # The server accepts only its admin's storage locations (docs/deployment.md).
            backend.allow_storage({"moto": s3, "shared": fs})
            client = boto3.client("s3", endpoint_url=endpoint)
            client.create_bucket(Bucket=BUCKET)
            with Server(backend, kind="serve") as server:
                assert server.proc is not None
                http = requests.Session()
                http.headers["Authorization"] = f"Token {token}"
                env = {
                    "url": server.url,
                    "token": token,
                    "endpoint": endpoint,
                    "client": client,
                    "http": http,
                    "fs": fs,
                    "server": psutil.Process(server.proc.pid),
                    "s3_ctx": checkpoint_context(
                        server.url, token, create_trial(server.url, token, s3), s3
                    ),
                    "fs_ctx": checkpoint_context(
                        server.url, token, create_trial(server.url, token, fs), fs
                    ),
                }
                for size_mb in sizes_mb:
                    paths = Paths(env, work, size_mb)
                    paths.rest_tar()  # warm: the server's first S3 client, page cache
                    if size_mb == max(sizes_mb):
                        figures.update(server_rss(paths, env["server"]))
                    rows = measure_size(paths, rounds)
                    figures["sizes"][str(size_mb)] = rows
                    print_rows(size_mb, rows)
                    shutil.rmtree(paths.source)
    finally:
        backend.cleanup()
    ratios = [row["ratio"] for rows in figures["sizes"].values() for row in rows.values()]
    figures["worst_ratio"] = min(ratios)
    return figures


def print_rows(size_mb: float, rows: dict[str, Any]) -> None:
    print(f"{size_mb} MB checkpoint (4 files): Headway MB/s vs baseline, ratio [range], CPU s")
    for name, row in rows.items():
        print(
            f"  {name:12s} {row['mb_s']:8.1f} vs {row['baseline']:15s} {row['baseline_mb_s']:8.1f}"
            f"  {row['ratio']:6.3f}x [{row['ratio_range'][0]:.3f}-{row['ratio_range'][1]:.3f}]"
            f"  cpu {row['cpu_s']:.3f} vs {row['baseline_cpu_s']:.3f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes-mb",
        default="4" if tiny() else "10,100,1024",
        help="checkpoint sizes in MB, comma-separated",
    )
    parser.add_argument(
        "--rounds", type=int, default=2 if tiny() else 5, help="interleaved pairs per path"
    )
    args = parser.parse_args()
    try:
        sizes = [float(size) for size in args.sizes_mb.split(",")]
    except ValueError:
        parser.error("--sizes-mb: numbers separated by commas")
    if min(sizes) <= 0 or args.rounds < 1:
        parser.error("--sizes-mb must be positive and --rounds at least 1")
    with tempfile.TemporaryDirectory(prefix="headway-ckpt-bench-") as tmp:
        figures = measure(sizes, args.rounds, Path(tmp))
    print(
        f"web server RSS {figures['server_rss_resting_mb']} MB at rest; growth streaming "
        f"{max(sizes)} MB: tar {figures['server_rss_growth_tar_mb']} MB, zip "
        f"{figures['server_rss_growth_zip_mb']} MB (target <= 32)"
    )
    print(f"worst ratio {figures['worst_ratio']} (target >= 0.8)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
