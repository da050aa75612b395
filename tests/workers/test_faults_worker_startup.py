"""Findings (issue #23, Low):

* "a ``HEADWAY_TRIAL_USER`` that cannot run the worker's Python makes every trial burn its
  restarts with no start-up check": the worker now starts that Python as that user first and
  refuses to start, naming the setting, the interpreter and the error.
* "the embedded SQLite default runs trials as the server's user with no warning when served to
  a network": ``make serve`` (``manage.py serve --bind``) warns when bound beyond loopback.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests
from django.core.exceptions import ImproperlyConfigured

from tests.helpers import REPO, free_port, wait_for
from workers import isolation
from workers.services import is_loopback


@pytest.fixture
def unprivileged_user():
    """A throwaway system user (root and useradd needed)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("HEADWAY_TRIAL_USER needs root (and useradd) to be tested")
    name = f"hwnopy{os.getpid()}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", name],
        check=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def hidden_venv():
    """The project's virtual environment reached through a folder only root may enter (0700):
    its Python runs for root and for nobody else, as a venv under /root does."""
    folder = Path(tempfile.mkdtemp(prefix="headway-hidden-"))
    folder.chmod(0o700)
    venv = Path(sys.prefix)
    (folder / "venv").symlink_to(venv, target_is_directory=True)
    yield folder / "venv" / "bin" / "python"
    shutil.rmtree(folder, ignore_errors=True)


def test_finding_trial_user_python_check_refuses_an_unreadable_interpreter(
    unprivileged_user, hidden_venv, settings
):
    settings.HEADWAY_TRIAL_USER = unprivileged_user.pw_name
    user = isolation.trial_user()
    assert user is not None
    with pytest.raises(ImproperlyConfigured, match=r"HEADWAY_TRIAL_USER=.*cannot run") as caught:
        isolation.check_trial_user_runs_python(user, python=str(hidden_venv))
    assert str(hidden_venv) in str(caught.value)


def test_finding_trial_user_cannot_run_python_worker_refuses_to_start(
    unprivileged_user, hidden_venv, tmp_path
):
    env = dict(
        os.environ, HEADWAY_TRIAL_USER=unprivileged_user.pw_name, HEADWAY_VAR_DIR=str(tmp_path)
    )
    proc = subprocess.run(
        [str(hidden_venv), "manage.py", "worker"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode != 0
    assert f"HEADWAY_TRIAL_USER='{unprivileged_user.pw_name}' cannot run" in proc.stderr
    assert "Host " not in proc.stdout  # it stopped before starting Celery


def test_loopback_addresses():
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.5", "headway.example.org"):
        assert not is_loopback(host), host


@pytest.mark.slow
def test_finding_embedded_default_served_to_network_warns(tmp_path):
    """``manage.py serve --bind 0.0.0.0`` on the embedded default (SQLite) warns on stderr,
    then serves as asked; it is stopped with SIGTERM, as Ctrl-C would."""
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "HEADWAY_TRIAL_USER")
    }
    env.update(HEADWAY_VAR_DIR=str(tmp_path), HEADWAY_QUEUE=f"serve-warning-{os.getpid()}")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=300,
    )
    out = (tmp_path / "serve.out").open("w")
    err = (tmp_path / "serve.err").open("w")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bind", "0.0.0.0", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=out,
        stderr=err,
    )
    try:
        # Up once it says so. The message is the command's last statement before its wait for
        # Ctrl-C / SIGTERM, and the SIGTERM handler was installed before the children started.
        wait_for(
            lambda: (
                proc.poll() is not None
                or "Headway is serving" in (tmp_path / "serve.out").read_text()
            ),
            120,
            "manage.py serve to say it is serving",
        )
        assert proc.poll() is None, "manage.py serve exited at start"
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).ok
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = (tmp_path / "serve.err").read_text()
    assert "WARNING: serving the embedded setup on 0.0.0.0" in text
    assert "as this server's own user" in text


def test_finding_db_connections_worker_refuses_a_pool_smaller_than_its_slots(tmp_path):
    """A worker whose pool could not hold one connection per running trial (plus its reaper,
    host heartbeat and beat) would answer its own trials' heartbeats with pool timeouts."""
    env = dict(
        os.environ,
        DATABASE_URL="postgres://nobody@127.0.0.1:1/unused",  # never connected to
        SECRET_KEY="k" * 50,
        HEADWAY_SLOTS="8",
        HEADWAY_DB_POOL_MAX_SIZE="4",
        HEADWAY_VAR_DIR=str(tmp_path),
    )
    env.pop("HEADWAY_TRIAL_USER", None)
    env.pop("HEADWAY_DB_CONN_MAX_AGE", None)
    proc = subprocess.run(
        [sys.executable, "manage.py", "worker"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode != 0
    assert "HEADWAY_DB_POOL_MAX_SIZE=4 is too small for this host's 8 slot(s)" in proc.stderr
