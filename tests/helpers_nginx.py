"""deploy/nginx.conf under Debian's nginx in a test: its deployment-specific lines (the listen
address, the two web servers ``web1`` and ``web2``, the pid file, the access log) pointed at
the test's own addresses and folder; everything else is the shipped file.

nginx is installed by .ci/run (``apt-get install nginx-light``); tests that need it call
``require(nginx_binary() is not None, ...)`` so they skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.helpers import REPO, require

CONF = REPO / "deploy" / "nginx.conf"


def nginx_binary() -> str | None:
    """The nginx executable, or None when it is not installed."""
    return shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )


def nginx_conf(
    text: str,
    *,
    listen_port: int,
    upstream_ports: tuple[int, int],
    run_dir: Path,
    address: str = "127.0.0.1",
) -> str:
    """deploy/nginx.conf's ``text`` with its deployment-specific lines replaced (each must
    exist once): it listens on ``address:listen_port`` and its web servers ``web1`` and ``web2``
    are ``address:upstream_ports[0]`` and ``[1]``.

    Raises:
        AssertionError: the file no longer has one of those lines (update this helper).
    """
    for old, new in (
        ("listen 80;", f"listen {address}:{listen_port};"),
        ("server web1:8000 ", f"server {address}:{upstream_ports[0]} "),
        ("server web2:8000 ", f"server {address}:{upstream_ports[1]} "),
        ("pid /run/nginx.pid;", f"pid {run_dir / 'nginx.pid'};"),
        ("access_log /dev/stdout;", "access_log off;"),
    ):
        assert text.count(old) == 1, f"deploy/nginx.conf no longer has {old!r}; update this test"
        text = text.replace(old, new)
    return text


def start_nginx(
    run_dir: Path,
    listen_port: int,
    upstream_port: int,
    second_port: int | None = None,
    *,
    address: str = "127.0.0.1",
) -> subprocess.Popen:
    """deploy/nginx.conf under Debian's nginx on ``address``, in the foreground (the caller
    stops it with ``stop_nginx``); its config, pid file and log (``nginx.log``) in
    ``run_dir``. Its second web server is ``second_port`` (default: the first one's port
    again)."""
    nginx = nginx_binary()
    require(nginx is not None, "nginx not installed (apt-get install nginx-light)")
    assert nginx is not None
    conf = run_dir / "nginx.conf"
    conf.write_text(
        nginx_conf(
            CONF.read_text(),
            listen_port=listen_port,
            upstream_ports=(upstream_port, second_port or upstream_port),
            run_dir=run_dir,
            address=address,
        )
    )
    with (run_dir / "nginx.log").open("wb") as log:
        return subprocess.Popen(
            [nginx, "-p", str(run_dir), "-e", "stderr", "-c", str(conf), "-g", "daemon off;"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop_nginx(proxy: subprocess.Popen | None) -> None:
    """Stop an nginx of ``start_nginx`` (SIGTERM, SIGKILL after 10 s) and wait for it."""
    if proxy is None:
        return
    proxy.terminate()
    try:
        proxy.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proxy.kill()
        proxy.wait()
