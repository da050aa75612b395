"""A real web server (``registry.management.services.web_command``) as a child process that
tests can kill and restart on the same port (outage and connection tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.helpers import REPO, serves_headway, wait_for


def runserver_command(port: int) -> list[str]:
    """Django's development server (a thread per client connection)."""
    return [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]


class WebServer:
    """The web server on ``port`` with ``env`` (``command``: a function of the port; default
    ``registry.management.services.web_command``, what ``make serve`` runs); output appended to
    ``log``."""

    def __init__(
        self,
        port: int,
        env: dict[str, str],
        log: Path,
        command: Callable[[int], list[str]] | None = None,
    ) -> None:
        self.command = command
        self.port = port
        self.env = env
        self.log = log
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start it and wait until ``/healthz`` answers (60 s at most)."""
        from registry.management.services import web_command

        command = (self.command or web_command)(self.port)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                command,
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(lambda: serves_headway(self.url), 60, f"the web server on port {self.port}")

    def kill(self) -> None:
        """SIGKILL its process group (an outage: no graceful shutdown)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
