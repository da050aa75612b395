"""The master side of tests/netns_cluster.py: its own PostgreSQL and Redis on one address.

The machine's PostgreSQL and Redis listen on loopback only, which the namespaced hosts cannot
reach; these are private to one cluster, bound to the bridge address, and removed with it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.helpers import free_port

PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
S3_KEYS = {
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "region_name": "us-east-1",
}
S3_KEYS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_AS_POSTGRES = ["runuser", "-u", "postgres", "--"]


def run_checked(cmd: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd`` (output captured as text); RuntimeError with its stderr when it fails."""
    done = subprocess.run(list(cmd), capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def connects(host: str, port: int) -> bool:
    """Whether a TCP connection to ``host:port`` opens now."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class Postgres:
    """A PostgreSQL cluster of its own (``initdb`` + ``pg_ctl`` as user ``postgres``, trust
    authentication) listening on ``address`` for clients of ``network`` (CIDR), with a
    database ``headway``; ``url`` once started."""

    def __init__(self, address: str, network: str) -> None:
        self.address = address
        self.network = network
        self.data: Path | None = None
        self.options = ""  # the server's command-line options (start, restart)
        self.url = ""

    def start(self) -> str:
        """Create, start and return ``url``; RuntimeError naming the failing command."""
        bin_dir = PG_BIN[-1]
        # Not under pytest's folders: the postgres user may not be able to enter them.
        self.data = data = Path(tempfile.mkdtemp(prefix="headway-netns-pg-"))
        shutil.chown(data, "postgres", "postgres")
        run_checked(
            [
                *_AS_POSTGRES,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
            ]
        )
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {self.network} trust\n")
        port = free_port()
        self.options = options = (
            f"-c listen_addresses={self.address} -p {port} -k {data} -c fsync=off"
        )
        run_checked(
            [
                *_AS_POSTGRES,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-w",
                "-l",
                str(data / "log"),
                "-o",
                options,
                "start",
            ]
        )
        run_checked(
            [
                *_AS_POSTGRES,
                str(bin_dir / "createdb"),
                "-h",
                self.address,
                "-p",
                str(port),
                "headway",
            ]
        )
        self.url = f"postgres://postgres@{self.address}:{port}/headway"
        return self.url

    def restart(self, down: float) -> None:
        """Stop the server (``-m fast``: every connection cut), wait ``down`` seconds, start it
        again with the options it ran with."""
        assert self.data is not None, "not started"
        pg_ctl = [*_AS_POSTGRES, str(PG_BIN[-1] / "pg_ctl"), "-D", str(self.data)]
        run_checked([*pg_ctl, "-m", "fast", "-w", "stop"])
        time.sleep(down)
        run_checked([*pg_ctl, "-w", "-l", str(self.data / "log"), "-o", self.options, "start"])

    def stop(self) -> None:
        """Stop the server now (``-m immediate``) and remove its data; idempotent."""
        if self.data is None:
            return
        subprocess.run(
            [
                *_AS_POSTGRES,
                str(PG_BIN[-1] / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
        )
        shutil.rmtree(self.data, ignore_errors=True)
        self.data = None


def redis_command(address: str, port: int, folder: Path) -> list[str]:
    """A ``redis-server`` on ``address:port`` that other hosts may use (no protected mode,
    no persistence)."""
    return [
        "redis-server", "--bind", address, "--port", str(port), "--protected-mode", "no",
        "--save", "", "--appendonly", "no", "--dir", str(folder),
    ]  # fmt: skip
