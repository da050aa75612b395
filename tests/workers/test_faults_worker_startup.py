"""Second audit findings (Low):

* "a ``HEADWAY_TRIAL_USER`` that cannot run the worker's Python makes every trial burn its
  restarts with no start-up check": the host agent (``python -m workers``) now starts that
  Python as that user first and refuses to start, naming the setting, the interpreter and the
  error.
* "the embedded SQLite default runs trials as the server's user with no warning when served to
  a network": ``make serve`` (``manage.py serve --bind``) warns when bound beyond loopback
  (``registry.management.services.exposure_warning``).
* "a worker whose database pool is smaller than its slots answers its trials' heartbeats with
  pool timeouts": the host agent holds no database connection any more (its trials' heartbeats
  go to the master over REST), so it starts with any slots whatever the pool settings say.
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

from registry.management.services import exposure_warning, is_loopback
from tests.helpers import REPO, free_port, spawn_python, wait_for
from workers import config, isolation
from workers.config import AgentConfigError

# What ``python -m workers`` needs to get past its first check (never reached: the checks
# under test stop it first, or the test stops it).
AGENT_ENV = {"HEADWAY_MASTER": "http://127.0.0.1:9", "HEADWAY_HOST_TOKEN": "hwh_unused"}


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
    unprivileged_user, hidden_venv, monkeypatch
):
    monkeypatch.setattr(config.settings, "HEADWAY_TRIAL_USER", unprivileged_user.pw_name)
    user = isolation.trial_user()
    assert user is not None
    with pytest.raises(AgentConfigError, match=r"HEADWAY_TRIAL_USER=.*cannot run") as caught:
        isolation.check_trial_user_runs_python(user, python=str(hidden_venv))
    assert str(hidden_venv) in str(caught.value)


def test_finding_trial_user_cannot_run_python_worker_refuses_to_start(
    unprivileged_user, hidden_venv, tmp_path
):
    env = dict(
        os.environ,
        **AGENT_ENV,
        HEADWAY_TRIAL_USER=unprivileged_user.pw_name,
        HEADWAY_VAR_DIR=str(tmp_path),
    )
    proc = subprocess.run(
        [str(hidden_venv), "-m", "workers"],
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


def test_the_exposure_warning_is_for_the_embedded_setup_beyond_loopback(settings, monkeypatch):
    settings.HEADWAY_TRIAL_USER = ""
    monkeypatch.setitem(
        settings.DATABASES["default"], "ENGINE", "django.db.backends.sqlite3"
    )  # the embedded default (only the setting is read)
    warning = exposure_warning("0.0.0.0")
    assert warning is not None
    assert warning.startswith("WARNING: serving the embedded setup on 0.0.0.0")
    assert "HEADWAY_TRIAL_USER" in warning
    assert exposure_warning("127.0.0.1") is None and exposure_warning("::1") is None
    settings.HEADWAY_TRIAL_USER = "trials"  # trials run as another user
    assert exposure_warning("0.0.0.0") is None
    settings.HEADWAY_TRIAL_USER = ""
    monkeypatch.setitem(settings.DATABASES["default"], "ENGINE", "django.db.backends.postgresql")
    assert exposure_warning("0.0.0.0") is None  # a deployment with separate worker hosts


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


def test_finding_db_connections_the_agent_starts_whatever_the_database_pool(tmp_path):
    """The finding was a worker whose pool could not hold one connection per running trial:
    the host agent opens no database connection (its trials' heartbeats go to the master over
    REST), so a pool smaller than its slots and a database nobody can reach do not stop it: it
    passes its checks and offers its 8 slots."""
    env = dict(
        os.environ,
        **AGENT_ENV,
        DATABASE_URL="postgres://nobody@10.255.255.1:1/unused",  # never connected to
        HEADWAY_SLOTS="8",
        HEADWAY_DB_POOL_MAX_SIZE="4",
        HEADWAY_HOST_NAME="pool-check",
        HEADWAY_QUEUE=f"pool-check-{os.getpid()}",
        HEADWAY_VAR_DIR=str(tmp_path),  # the filesystem broker, under tmp_path
        REDIS_URL="",
        HEADWAY_BROKER_URL="",
    )
    env.pop("HEADWAY_TRIAL_USER", None)
    env.pop("HEADWAY_HOST_ADDRESS", None)
    out = tmp_path / "agent.out"
    proc = spawn_python(["-m", "workers"], env, out)
    try:
        line = "Host pool-check: 8 CPU slot(s)"
        wait_for(
            lambda: proc.poll() is not None or line in out.read_text(), 120, "the agent's host line"
        )
        assert line in out.read_text(), out.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "HEADWAY_DB_POOL" not in out.read_text()
