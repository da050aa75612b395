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
- ``fs_store``: ``store_path`` on shared_fs, files copied in with ``shutil.copyfile``, made
  durable (fsync) and registered, vs ``cp -r`` + ``sync`` of the copied files and folders (the
  goal's baseline: the same durability); ``fs_store_vs_cp``: the same step vs plain ``cp -r``.
  ``fs_download``: ``CheckpointContext.download`` vs ``cp -r``.
- ``rest_tar`` / ``rest_zip``: ``GET checkpoints/{uuid}/download?format=`` of the S3 checkpoint
  into a file vs boto3 ``download_file`` of each file; ``fs_rest_tar`` / ``fs_rest_zip``: the
  same of the shared_fs checkpoint vs ``cp -r`` of its folder.
- ``cli``: ``headway checkpoint download`` (a process) vs a process that downloads the same files
  with boto3 (``python -c``): both pay an interpreter start; ``fs_cli``: the same of the
  shared_fs checkpoint (``--mode auto``: copied from the folder, mounted here) vs a process
  copying its folder with ``shutil.copytree``; ``fs_cli_master``: the same with ``--mode master``
  (through the registry's web server).
- Ceilings, informative (left out of ``worst_ratio``): ``static_http``, the shared_fs
  checkpoint's files fetched one GET each from nginx serving its folder (sendfile) by the
  client ``fs_rest_tar`` uses, vs ``cp -r``: what any HTTP download of those bytes reaches here
  (left out, and said so, where nginx is not installed); ``http_copy_process``, a Python process
  that makes one ``http.client`` GET to the registry and copies the folder, vs
  ``copy_process``: the floor of any Python command that asks the registry where a checkpoint
  is. The process rows run with bytecode written and read (PYTHONDONTWRITEBYTECODE dropped), as
  an installed package runs.

Modules: ``_checkpoint_setup`` (bytes, moto, the trial), ``_checkpoint_meter`` (time, RSS),
``_checkpoint_paths`` (the steps and ``PAIRS``), this file (rounds, figures, the report).

An untimed round first runs every step once (bytecode, caches, and memory a fresh virtual
machine has not yet handed out: a first touch made single steps 4x slower). Each round then runs
every pair, its two sides in alternating order (interleaved pairs, so drift in the machine's
load hits both alike). A row gives the median MB/s of each side, the median of the
per-pair ratios (Headway / baseline: above 1 is faster) with its range, and the CPU seconds of
each side (this process, its children and the web server; moto's excluded). The web server's
RSS is reported at rest (before any download) and its growth while streaming the largest
checkpoint as tar and zip. The last line printed is one JSON object of all figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _checkpoint_meter import Meter, RSSWatch
from _checkpoint_paths import NEEDS_NGINX, PAIRS, Paths
from _checkpoint_setup import (
    AWS_ENV,
    BUCKET,
    checkpoint_context,
    create_trial,
    moto_server,
    static_server,
)
from _server import Backend, Server
from _tiny import tiny

__all__ = ["NEEDS_NGINX", "PAIRS", "measure"]
# Rows left out of ``worst_ratio``: not goals, but what they are read against.
INFORMATIVE = ("fs_store_vs_cp", "static_http", "http_copy_process")


def measure_size(
    paths: Paths, rounds: int, pairs: tuple[tuple[str, str], ...] = PAIRS
) -> dict[str, Any]:
    """One untimed round, then ``rounds`` rounds of every pair of ``pairs`` (sides
    alternating); the figures of each."""
    total_mb = sum(paths.sizes.values()) / (1 << 20)
    runs: dict[str, list[tuple[Meter, Meter]]] = {name: [] for name, _ in pairs}
    for name, base in pairs:  # one untimed round: bytecode, caches, memory the VM never handed out
        getattr(paths, name)()
        getattr(paths, base)()
    for round_no in range(rounds):
        for name, base in pairs:
            sides = [getattr(paths, name), getattr(paths, base)]
            if round_no % 2:
                second, first = sides[1](), sides[0]()
            else:
                first, second = sides[0](), sides[1]()
            runs[name].append((first, second))
    rows: dict[str, Any] = {}
    for name, base in pairs:
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
    the checkpoint once as tar and once as zip, from S3 and from shared_fs."""
    figures = {}
    for storage, storage_id in (("", paths.s3_id), ("fs_", paths.fs_id)):
        for kind in ("tar", "zip"):
            with RSSWatch(server) as watch:
                paths._rest(kind, storage_id)
            figures[f"server_rss_growth_{storage}{kind}_mb"] = round(watch.growth / (1 << 20), 1)
            figures.setdefault("server_rss_resting_mb", round(max(watch.rest) / (1 << 20), 1))
    return figures


def measure(
    sizes_mb: list[float], rounds: int, work: Path, pairs: tuple[tuple[str, str], ...] = PAIRS
) -> dict[str, Any]:
    """Start moto and the server, then measure every size (the rows of ``pairs``); returns the
    JSON line's object."""
    import boto3

    os.environ.update(AWS_ENV)
    backend = Backend.from_environment("headway_bench_ckpt")
    figures: dict[str, Any] = {"backend": backend.label, "rounds": rounds, "sizes": {}}
    try:
        token = backend.prepare()
        with (
            moto_server() as endpoint,
            static_server(work / "shared", work / "nginx") as static_url,
        ):
            if static_url is None:
                print("nginx is not installed: the static_http row is left out")
                figures["static_http"] = "nginx not installed"
                pairs = tuple(pair for pair in pairs if pair[0] not in NEEDS_NGINX)
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
                    "static_url": static_url,
                    "static_http": requests.Session(),
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
                    rows = measure_size(paths, rounds, pairs)
                    figures["sizes"][str(size_mb)] = rows
                    print_rows(size_mb, rows)
                    shutil.rmtree(paths.source)
    finally:
        backend.cleanup()
    # The goal's rows: shared_fs store against plain `cp` (no fsync) is reported, not judged.
    ratios = [
        row["ratio"]
        for rows in figures["sizes"].values()
        for name, row in rows.items()
        if name not in INFORMATIVE
    ]
    figures["worst_ratio"] = min(ratios) if ratios else None
    return figures


def print_rows(size_mb: float, rows: dict[str, Any]) -> None:
    print(f"{size_mb} MB checkpoint (4 files): Headway MB/s vs baseline, ratio [range], CPU s")
    for name, row in rows.items():
        print(
            f"  {name:17s} {row['mb_s']:8.1f} vs {row['baseline']:15s} {row['baseline_mb_s']:8.1f}"
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
    parser.add_argument(
        "--paths",
        default="",
        help="only these rows, comma-separated (default: all): "
        + ", ".join(name for name, _ in PAIRS),
    )
    args = parser.parse_args()
    wanted = [name for name in args.paths.split(",") if name]
    unknown = sorted(set(wanted) - {name for name, _ in PAIRS})
    if unknown:
        parser.error(f"--paths: unknown {', '.join(unknown)}")
    pairs = tuple(pair for pair in PAIRS if not wanted or pair[0] in wanted)
    try:
        sizes = [float(size) for size in args.sizes_mb.split(",")]
    except ValueError:
        parser.error("--sizes-mb: numbers separated by commas")
    if min(sizes) <= 0 or args.rounds < 1:
        parser.error("--sizes-mb must be positive and --rounds at least 1")
    with tempfile.TemporaryDirectory(prefix="headway-ckpt-bench-") as tmp:
        figures = measure(sizes, args.rounds, Path(tmp), pairs)
    print(
        f"web server RSS {figures['server_rss_resting_mb']} MB at rest; growth streaming "
        f"{max(sizes)} MB: tar {figures['server_rss_growth_tar_mb']} MB, zip "
        f"{figures['server_rss_growth_zip_mb']} MB from S3, tar "
        f"{figures['server_rss_growth_fs_tar_mb']} MB, zip {figures['server_rss_growth_fs_zip_mb']}"
        " MB from shared_fs (target <= 32)"
    )
    print(f"worst ratio {figures['worst_ratio']} (target >= 0.8)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
