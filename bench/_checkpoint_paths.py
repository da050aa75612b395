"""Checkpoint I/O bench, the timed steps: each Headway path and the plain tool it is paired with.

``PAIRS`` lists the rows as ``(Headway step, baseline step)``, methods of ``Paths``; every step
returns a stopped ``Meter``. ``bench/checkpoint_io.py`` runs them in interleaved pairs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _checkpoint_meter import Meter
from _checkpoint_setup import BUCKET, make_source
from _server import REPO

# (Headway step, its baseline): the rows of the report, in the order each round runs them.
PAIRS = (
    ("s3_store", "boto3_upload"),
    ("s3_restore", "boto3_download"),
    ("fs_store", "cp_sync_store"),
    ("fs_store_vs_cp", "cp_store"),
    ("fs_download", "cp_download"),
    ("rest_tar", "boto3_download"),
    ("rest_zip", "boto3_download"),
    ("cli", "boto3_process"),
    ("fs_rest_tar", "cp_download"),
    ("fs_rest_zip", "cp_download"),
    ("fs_cli", "copy_process"),
    ("fs_cli_master", "copy_process"),
    # Ceilings (informative): the fastest plain HTTP download of the same files, and the least
    # a Python process that asks the registry anything pays, against the same baselines.
    ("static_http", "cp_download"),
    ("http_copy_process", "copy_process"),
)
# Needs nginx (``static_server``); left out of the run, and said so, where it is not installed.
NEEDS_NGINX = ("static_http",)
_BOTO3_PROCESS = """
import sys, boto3
from pathlib import Path
endpoint, prefix, target, *rels = sys.argv[1:]
client = boto3.client("s3", endpoint_url=endpoint)
for rel in rels:
    (Path(target) / rel).parent.mkdir(parents=True, exist_ok=True)
    client.download_file("bench", f"{prefix}/{rel}", str(Path(target) / rel))
"""
_COPY_PROCESS = "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])"
# One stdlib GET to the registry (its cheapest answer), then the copy: no Python command that
# asks the registry where a checkpoint is can do less.
_HTTP_COPY_PROCESS = """
import http.client, shutil, sys
connection = http.client.HTTPConnection(sys.argv[1])
connection.request("GET", "/healthz")
assert connection.getresponse().read()
shutil.copytree(sys.argv[2], sys.argv[3])
"""


def process_env(**extra: str) -> dict[str, str]:
    """The environment of the process rows: this one's, plus ``extra``, and bytecode written
    and read as an installed package has it (a shell that sets PYTHONDONTWRITEBYTECODE would
    bill the CLI for compiling Headway's modules at every start, and the stdlib-only
    baselines for nothing)."""
    env = {**os.environ, **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


class Paths:
    """The timed steps of one checkpoint size, on the bench's environment ``env`` (the server,
    its URL and token, the S3 client and both ``CheckpointContext``s: ``checkpoint_io.measure``).
    """

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
        self._stored: str | None = None  # the last ``fs_store`` step's checkpoint

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
        """``store_path`` on shared_fs: the files written (``shutil.copyfile``), made durable
        and registered.

        The previous step's checkpoint is deleted just before, as ``out`` removes a baseline's
        previous copy just before it: on a virtual machine, memory freed some seconds earlier
        has gone back to the host, and writing into it is 2-3x slower (50 MB: 15 ms into
        memory freed at once, 29-42 ms into memory freed 15 s before), which would bill only
        this side."""
        if self._stored is not None:
            self.env["fs_ctx"].storage_manager.delete(self._stored)
        meter, self._stored = self._store(self.env["fs_ctx"], shutil.copyfile)
        return meter

    fs_store_vs_cp = fs_store  # the same step, paired with plain ``cp`` (no fsync)

    def cp_store(self) -> Meter:
        return self._cp(self.source, self.out("cp"))

    def cp_sync_store(self) -> Meter:
        """``cp -r``, then ``sync`` of the copied files and folders (fsync each: the durability
        ``store_path`` gives before it registers), not of the whole machine."""
        target = self.out("cp")
        folders = {str(target / rel).rsplit("/", 1)[0] for rel in self.sizes}
        names = sorted({str(target / rel) for rel in self.sizes} | folders | {str(target)})
        meter = self.meter()
        meter.start()
        subprocess.run(["cp", "-r", str(self.source), str(target)], check=True)
        subprocess.run(["sync", *names], check=True)
        return meter.stop()

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
        return self._rest("tar", self.s3_id)

    def rest_zip(self) -> Meter:
        return self._rest("zip", self.s3_id)

    def fs_rest_tar(self) -> Meter:
        return self._rest("tar", self.fs_id)

    def fs_rest_zip(self) -> Meter:
        return self._rest("zip", self.fs_id)

    def _rest(self, kind: str, storage_id: str) -> Meter:
        target, meter = self.out("rest"), self.meter()
        url = f"{self.env['url']}/api/v1/checkpoints/{storage_id}/download"
        meter.start()
        with self.env["http"].get(url, params={"format": kind}, stream=True) as response:
            response.raise_for_status()
            with open(target, "wb") as fh:
                for chunk in response.iter_content(1 << 20):
                    fh.write(chunk)
        return meter.stop()

    def cli(self) -> Meter:
        return self._cli(self.s3_id)

    def fs_cli(self) -> Meter:
        """The default ``--mode auto``: a copy from the shared_fs folder, mounted here."""
        return self._cli(self.fs_id)

    def fs_cli_master(self) -> Meter:
        """``--mode master``: the same files through the registry's web server."""
        return self._cli(self.fs_id, "--mode", "master")

    def _cli(self, storage_id: str, *options: str) -> Meter:
        """``headway checkpoint download UUID -o DIR`` as a user runs it."""
        target, meter = self.out("cli"), self.meter()
        env = process_env(HEADWAY_MASTER=self.env["url"], HEADWAY_TOKEN=self.env["token"])
        command = [sys.executable, "-m", "headway.cli", "checkpoint", "download", storage_id]
        meter.start()
        subprocess.run(
            [*command, "-o", str(target), "--no-progress", *options],
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
            [
                sys.executable,
                "-c",
                _BOTO3_PROCESS,
                self.env["endpoint"],
                self.plain,
                str(target),
                *self.sizes,
            ],
            check=True,
            env=process_env(),
        )
        return meter.stop()

    def copy_process(self) -> Meter:
        """A Python process copying the stored folder with ``shutil.copytree`` (it pays an
        interpreter start, as the CLI does)."""
        target, meter = self.out("copy-process"), self.meter()
        source = Path(self.env["fs"]["host_path"]) / self.fs_id
        meter.start()
        subprocess.run(
            [sys.executable, "-c", _COPY_PROCESS, str(source), str(target)],
            check=True,
            env=process_env(),
        )
        return meter.stop()

    def http_copy_process(self) -> Meter:
        """``copy_process`` after one ``http.client`` GET to the registry: the floor of any
        Python command that asks the registry where the checkpoint is."""
        target, meter = self.out("http-copy-process"), self.meter()
        source = Path(self.env["fs"]["host_path"]) / self.fs_id
        address = self.env["url"].split("://", 1)[1]
        meter.start()
        subprocess.run(
            [sys.executable, "-c", _HTTP_COPY_PROCESS, address, str(source), str(target)],
            check=True,
            env=process_env(),
        )
        return meter.stop()

    def static_http(self) -> Meter:
        """The stored folder's files fetched from nginx (``static_server``: sendfile) one GET
        each, by the client ``_rest`` uses, into files: the ceiling of an HTTP download."""
        target, meter = self.out("static"), self.meter()
        base = f"{self.env['static_url']}/{self.fs_id}"
        session = self.env["static_http"]
        meter.start()
        for rel in self.sizes:
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            with session.get(f"{base}/{rel}", stream=True) as response:
                response.raise_for_status()
                with open(target / rel, "wb") as fh:
                    for chunk in response.iter_content(1 << 20):
                        fh.write(chunk)
        return meter.stop()
