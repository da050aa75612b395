"""A private PostgreSQL server for tests that load it to its limits or restart it.

The machine's cluster (127.0.0.1:5432) is shared by the whole suite (and other people's test
runs): a test that fills its ``max_connections`` or restarts it would break them. This one runs
``initdb`` into a temporary folder and serves on a free loopback port with the settings the
test names (default: PostgreSQL's own ``max_connections=100``), trust authentication.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.helpers import free_port, require


def _bin_dir() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivatePostgres:
    """``initdb`` + ``pg_ctl start`` on a free port; ``url(db)`` for Django, ``restart()``,
    ``stop()`` (context manager: stopped and removed on exit).

    Arguments:
        settings: extra ``-c name=value`` server settings (``max_connections`` defaults to 100,
            PostgreSQL's default).

    Skips the test (fails under CI=true) when no PostgreSQL binaries are installed.
    """

    def __init__(self, **settings: str | int) -> None:
        bin_dir = _bin_dir()
        require(bin_dir is not None, "PostgreSQL server binaries (initdb, pg_ctl) not installed")
        assert bin_dir is not None
        self.bin_dir = bin_dir
        self.settings = {"max_connections": 100, **settings}
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="headway-pg-"))
        self.data = self.root / "data"
        # initdb and the server refuse to run as root: as root, run them as `postgres`.
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o755)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(
            command, capture_output=True, text=True, check=check, timeout=120, cwd=self.root
        )

    def _options(self) -> str:
        pairs = {
            "port": self.port,
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.root),
            "fsync": "off",  # a throwaway cluster: no durability needed
            **self.settings,
        }
        return " ".join(f"-c {name}={value}" for name, value in pairs.items())

    def start(self) -> PrivatePostgres:
        """initdb (first time) and start; wait until it accepts connections."""
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", self._options(), "-l",
            str(self.root / "server.log"), "-w", "-t", "60", "start",
        )  # fmt: skip
        return self

    def restart(self) -> None:
        """A fast restart (open connections are cut), waiting until it accepts again."""
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", self._options(), "-l",
            str(self.root / "server.log"), "-m", "fast", "-w", "-t", "60", "restart",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server (immediate) and remove its folder."""
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """``postgres://postgres@127.0.0.1:<port>/<database>``."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        """The server's log so far (for failure messages)."""
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> PrivatePostgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
