"""An MLflow tracking server (``mlflow server``) on a PostgreSQL database of its own, for a peer row.

The full ``mlflow`` package (the ``bench`` extra; the project otherwise installs
``mlflow-skinny``, the client alone) has the server. ``mlflow_server_missing()`` says why a
benchmark cannot start one, so it reports the peer as not measured instead of failing.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests
from _server import free_port, postgres_drop, postgres_recreate, stop_process_group

# The first start creates MLflow's tables (its Alembic migrations): ~40 s on the busy 2-core machine.
START_TIMEOUT_S = 180.0


def mlflow_server_missing(database_url: str) -> str | None:
    """None when an MLflow tracking server can run on ``database_url``'s server, else why not
    (the full ``mlflow`` package is not installed, PostgreSQL is unreachable)."""
    try:
        importlib.metadata.version("mlflow")
    except importlib.metadata.PackageNotFoundError:
        return "the mlflow package (with its server) is not installed: pip install -e '.[bench]'"
    problem = postgres_recreate(database_url)
    return None if problem is None else f"PostgreSQL unreachable: {problem}"


class MlflowServer:
    """``mlflow server`` on 127.0.0.1 with its backend store in PostgreSQL (context manager).

    Args:
        database_url: ``postgres://user@host:port/name``; the database is recreated on start
            and dropped on stop.
        workers: uvicorn worker processes (``--workers``).

    Raises:
        RuntimeError: when the server does not answer ``/health`` within ``START_TIMEOUT_S``.
    """

    def __init__(self, database_url: str, workers: int = 2) -> None:
        self.database_url, self.workers = database_url, workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.var_dir = Path(tempfile.mkdtemp(prefix="headway-bench-mlflow-"))
        self._log = self.var_dir / "mlflow-server.log"

    def _store_uri(self) -> str:
        # SQLAlchemy's psycopg (3) dialect: psycopg is installed, psycopg2 is not.
        parts = urlsplit(self.database_url)
        return urlunsplit(("postgresql+psycopg", parts.netloc, parts.path, "", ""))

    def start(self) -> MlflowServer:
        problem = postgres_recreate(self.database_url)
        if problem is not None:
            raise RuntimeError(f"cannot create MLflow's database: {problem}")
        mlflow_cli = str(Path(sys.executable).with_name("mlflow"))
        command = [
            mlflow_cli, "server",
            "--backend-store-uri", self._store_uri(),
            "--default-artifact-root", str(self.var_dir / "artifacts"),
            "--host", "127.0.0.1", "--port", str(self.port),
            "--workers", str(self.workers),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        with self._log.open("w") as log:
            # A new session so stop() signals the server, its uvicorn workers and job runner.
            self.proc = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if requests.get(f"{self.url}/health", timeout=5).ok:
                    return self
            except (requests.ConnectionError, requests.Timeout):
                pass  # migrating its tables, or uvicorn not listening yet
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not start:\n{self._log.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM the server's process group (SIGKILL after 10 s); drop its database."""
        stop_process_group(self.proc)
        postgres_drop(self.database_url)
        shutil.rmtree(self.var_dir, ignore_errors=True)

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
