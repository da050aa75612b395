"""Checkpoint I/O bench, set-up: the checkpoint's bytes, moto's S3 server, a trial to register to.

Used by ``bench/checkpoint_io.py`` (its docstring says what is measured).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests
from _server import free_port, single_file_model_definition

# The checkpoint: four files in nested folders, these shares of its size.
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
def _served(command: list[str], url: str, name: str, timeout_s: float) -> Iterator[str]:
    """Run ``command`` (a server on ``url``) until the block ends; yield ``url`` once it
    answers anything but a 5xx within ``timeout_s`` (RuntimeError naming ``name`` if not)."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            # Not listening yet, or too busy to answer within the timeout on a loaded machine.
            with contextlib.suppress(requests.RequestException):
                if requests.get(url, timeout=10).status_code < 500:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{name} did not answer at {url}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's S3 server as a subprocess; yields its endpoint URL (the process is ended after)."""
    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with _served(command, f"http://127.0.0.1:{port}", "moto's S3 server", 120) as url:
        yield url


# The static file server of the ceiling row: nginx as a team would run it for plain files
# (sendfile on, no logging), serving one folder on loopback.
_NGINX_CONF = """
user {user};
worker_processes 1;
pid {run}/nginx.pid;
error_log stderr;
events {{ worker_connections 64; }}
http {{
    sendfile on;
    tcp_nopush on;
    access_log off;
    default_type application/octet-stream;
    client_body_temp_path {run}/body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


def nginx_binary() -> str | None:
    """Debian's nginx (``apt-get install nginx-light``: .ci/run installs it), or None."""
    return shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )


@contextlib.contextmanager
def static_server(root: Path, run: Path) -> Iterator[str | None]:
    """nginx serving the files under ``root`` on loopback (its config and pid under ``run``);
    yields its URL, or None when nginx is not installed (the process is ended after)."""
    nginx = nginx_binary()
    if nginx is None:
        yield None
        return
    run.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = run / "nginx.conf"
    # Workers as this user (nginx's default, nobody, may not read a private temporary folder).
    user = pwd.getpwuid(os.geteuid()).pw_name
    conf.write_text(_NGINX_CONF.format(user=user, run=run, port=port, root=root))
    command = [nginx, "-p", str(run), "-e", "stderr", "-c", str(conf), "-g", "daemon off;"]
    # Any answer but a 5xx will do (403 or 404 for the folder itself).
    with _served(command, f"http://127.0.0.1:{port}", "nginx", 30) as url:
        yield url


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
    from headway.core._checkpoint_registry import RESTCheckpointRegistry
    from headway.storage import build_storage_manager

    return CheckpointContext(
        distributed=DistributedContext(
            rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
        ),
        storage_manager=build_storage_manager(storage),
        registry=RESTCheckpointRegistry(Session(url, token), trial_id, run_id=1),
    )
