"""Start a throwaway Headway web server for a benchmark: fresh database, user token, subprocess.

The benchmarks measure the server the way a trial process sees it (HTTP over loopback), so each
run gets its own database (a temp SQLite file or a freshly created PostgreSQL database), its own
``HEADWAY_VAR_DIR`` and a Celery queue nobody consumes (trial runs are enqueued on experiment
creation; nothing needs to run them).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

REPO = Path(__file__).resolve().parent.parent
MANAGE = str(REPO / "manage.py")
START_TIMEOUT_S = 60.0
# runserver with Nagle's algorithm off on accepted sockets: the fix proposed in the bench report.
# wsgiref writes the status/headers and the body in separate send() calls; with Nagle on, the
# body waits for the client's delayed ACK (40 ms on Linux) on every keep-alive request.
_NODELAY_RUNSERVER = (
    "import sys, django; django.setup()\n"
    "from django.core.servers.basehttp import WSGIRequestHandler\n"
    "WSGIRequestHandler.disable_nagle_algorithm = True\n"
    "from django.core.management import call_command\n"
    "call_command('runserver', '--noreload', sys.argv[1])\n"
)


def free_port() -> int:
    """A TCP port unused on every local address (the OS picks it on the wildcard address;
    racy in theory, fine for a bench)."""
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return sock.getsockname()[1]


def stop_process_group(proc: subprocess.Popen | None, grace: float = 10.0) -> None:
    """SIGTERM ``proc``'s process group, SIGKILL it ``grace`` seconds later; nothing when it
    is None or has ended."""
    if proc is None or proc.poll() is not None:
        return
    pgid = os.getpgid(proc.pid)
    os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        proc.wait()


def single_file_model_definition(filename: str, source: str) -> str:
    """A model definition holding one file, as the REST API takes it (base64 tar.gz)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = source.encode()
        info = tarfile.TarInfo(filename)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank below."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def gunicorn_available() -> bool:
    """Whether gunicorn (a dependency) can be imported by this interpreter."""
    return importlib.util.find_spec("gunicorn") is not None


def _admin_url(database_url: str) -> tuple[str, str]:
    """The maintenance-database URL of a PostgreSQL URL, and the database name it names."""
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    scheme = "postgresql" if parts.scheme in ("postgres", "postgresql") else parts.scheme
    return urlunsplit((scheme, parts.netloc, "/postgres", "", "")), name


def postgres_recreate(database_url: str) -> str | None:
    """Drop and create the database that ``database_url`` names.

    Args:
        database_url: ``postgres://user@host:port/name``.

    Returns:
        None on success, else a one-line reason (server unreachable, no permission) so the caller
        can skip PostgreSQL with a note instead of failing.
    """
    import psycopg

    admin, name = _admin_url(database_url)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return None


def postgres_drop(database_url: str) -> None:
    """Drop the database that ``database_url`` names (best effort, for clean-up)."""
    import psycopg

    admin, name = _admin_url(database_url)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error as exc:
        print(f"note: could not drop {name}: {exc}", file=sys.stderr)


@dataclass
class Backend:
    """One database + var dir + the environment every ``manage.py`` call and server gets.

    Attributes:
        label: ``sqlite`` or ``postgres`` (prefix of the JSON keys).
        database_url: ``DATABASE_URL`` for settings.py (dj-database-url syntax).
        var_dir: a fresh temp directory used as ``HEADWAY_VAR_DIR``.
    """

    label: str
    database_url: str
    var_dir: Path
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def sqlite(cls) -> Backend:
        """A fresh SQLite file in a new temp directory."""
        var_dir = Path(tempfile.mkdtemp(prefix="headway-bench-"))
        return cls("sqlite", f"sqlite:///{var_dir / 'bench.sqlite3'}", var_dir)

    @classmethod
    def postgres(cls, database_url: str) -> Backend:
        """PostgreSQL at ``database_url`` (the caller creates the database first)."""
        return cls("postgres", database_url, Path(tempfile.mkdtemp(prefix="headway-bench-")))

    @classmethod
    def from_environment(cls, name: str) -> Backend:
        """PostgreSQL when ``DATABASE_URL`` names a PostgreSQL server (a fresh database ``name``
        on it, dropped by ``cleanup``), else a fresh SQLite file (the embedded default).

        ``bench/run_all.py`` sets ``DATABASE_URL`` for its PostgreSQL + Redis + S3 pass; a server
        that cannot be reached falls back to SQLite with a note on stderr.
        """
        database_url = os.environ.get("DATABASE_URL", "")
        if database_url.startswith(("postgres://", "postgresql://")):
            url = database_url.rsplit("/", 1)[0] + f"/{name}_{os.getpid()}"
            problem = postgres_recreate(url)
            if problem is None:
                return cls.postgres(url)
            print(f"note: PostgreSQL unavailable ({problem}); using SQLite", file=sys.stderr)
        found = cls.sqlite()
        found.env.pop("REDIS_URL", None)
        return found

    def allow_storage(self, locations: dict[str, dict[str, Any]]) -> None:
        """Make ``locations`` (``{name: checkpoint_storage dict}``, the first one the default)
        the admin's storage locations of every process started with this backend's env.

        The server refuses checkpoint storage outside ``HEADWAY_STORAGE_LOCATIONS``
        (docs/deployment.md), so a benchmark names its own bucket or folder here.
        """
        path = self.var_dir / "storage-locations.json"
        path.write_text(json.dumps({"default": next(iter(locations)), "locations": locations}))
        self.env["HEADWAY_STORAGE_LOCATIONS"] = str(path)

    def __post_init__(self) -> None:
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": self.database_url,
            # A deployment's settings require a key on PostgreSQL; a throwaway one per run here.
            "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
            "HEADWAY_VAR_DIR": str(self.var_dir),
            # Nobody consumes this queue: trial runs enqueued at experiment creation just sit.
            "HEADWAY_QUEUE": f"bench-{os.getpid()}",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }

    def manage(self, *args: str, repo: Path = REPO) -> str:
        """Run ``manage.py ARGS`` with this backend's environment; return its stdout.

        ``repo``: the source tree whose ``manage.py`` runs (another commit's worktree).

        Raises:
            RuntimeError: with the command's stderr when it exits non-zero.
        """
        proc = subprocess.run(
            [sys.executable, str(repo / "manage.py"), *args],
            cwd=repo,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{proc.stderr.strip()}")
        return proc.stdout

    def prepare(self, username: str = "bench") -> str:
        """Migrate the fresh database and return a new user's API token."""
        self.manage("migrate", "--noinput", "-v", "0")
        return self.manage("headway_token", username, "--create").strip().splitlines()[-1]

    def cleanup(self) -> None:
        """Remove the var dir (and the PostgreSQL database for the postgres backend)."""
        if self.label == "postgres":
            postgres_drop(self.database_url)
        shutil.rmtree(self.var_dir, ignore_errors=True)


def backend_factories(postgres_url: str, *, postgres: bool = True) -> list[Callable[[], Backend]]:
    """The backends a benchmark measures: SQLite, then PostgreSQL at ``postgres_url`` (recreated)
    unless ``postgres`` is False or the server is unreachable (a note says why).

    ``HEADWAY_BENCH_BACKENDS=sqlite`` or ``=postgres`` keeps only that one (``bench/run_all.py``
    runs every benchmark once per backend)."""
    only = os.environ.get("HEADWAY_BENCH_BACKENDS", "")
    factories: list[Callable[[], Backend]] = [] if only == "postgres" else [Backend.sqlite]
    if postgres and only != "sqlite":
        why = postgres_recreate(postgres_url)
        if why is None:
            factories.append(lambda: Backend.postgres(postgres_url))
        else:
            print(f"note: skipping PostgreSQL ({postgres_url} unreachable: {why})")
    return factories


class Server:
    """A web server subprocess serving Headway on 127.0.0.1 (context manager).

    Args:
        backend: the database/env to serve.
        kind: ``runserver`` (Django's threaded dev server, what the embedded setup runs),
            ``runserver_nodelay`` (the same with TCP_NODELAY on accepted sockets) or
            ``gunicorn`` (``workers`` sync processes; only when gunicorn is importable) or
            ``serve`` (gunicorn with config/gunicorn.py, as ``manage.py serve`` runs it).
        workers: gunicorn worker processes (ignored for runserver).
        repo: the source tree served (default this one; another commit's worktree for a
            side-by-side baseline, bench/_report_pairs.py).

    Raises:
        RuntimeError: when the server does not answer ``/healthz`` within ``START_TIMEOUT_S``.
    """

    def __init__(
        self, backend: Backend, kind: str = "runserver", workers: int = 2, repo: Path = REPO
    ) -> None:
        self.backend, self.kind, self.workers, self.repo = backend, kind, workers, repo
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self._log = backend.var_dir / f"server-{kind}-{self.port}.log"

    def _command(self) -> list[str]:
        if self.kind == "runserver":
            manage = str(self.repo / "manage.py")
            return [sys.executable, manage, "runserver", "--noreload", f"127.0.0.1:{self.port}"]
        if self.kind == "runserver_nodelay":
            return [sys.executable, "-c", _NODELAY_RUNSERVER, f"127.0.0.1:{self.port}"]
        if self.kind == "gunicorn":
            return [
                sys.executable, "-m", "gunicorn", "config.wsgi:application",
                "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers),
                "--log-level", "warning",
            ]  # fmt: skip
        if self.kind == "serve":  # what `manage.py serve` runs: config/gunicorn.py (gthread)
            return [
                sys.executable, "-m", "gunicorn", "config.wsgi:application",
                "--config", str(self.repo / "config" / "gunicorn.py"),
                "--bind", f"127.0.0.1:{self.port}",
            ]  # fmt: skip
        raise ValueError(f"unknown server kind {self.kind!r}")

    def start(self) -> Server:
        with self._log.open("w") as log:
            # A new session so stop() can signal the server and any children it forked.
            self.proc = subprocess.Popen(
                self._command(),
                cwd=self.repo,
                env=self.backend.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if requests.get(f"{self.url}/healthz", timeout=5).ok:
                    return self
            except (requests.ConnectionError, requests.Timeout):
                pass  # not listening yet, or a worker still loading Django
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.kind} did not start:\n{self._log.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL it after 10 s."""
        stop_process_group(self.proc)

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) used so far by the server process and its children (its
        gunicorn workers); this process's own when the server is not running as a subprocess."""
        import psutil

        proc = psutil.Process(self.proc.pid if self.proc is not None else os.getpid())
        total = 0.0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                times = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
