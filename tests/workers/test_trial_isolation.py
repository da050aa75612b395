"""Trial isolation (the security review's High "Trial code has the worker's full privileges"): a
real trial process started by the host agent's runner sees no secret of its host (the host token,
the broker URL) nor of a server, and with ``HEADWAY_TRIAL_USER`` runs as another Unix user that
cannot read the agent's environment (where its host token is) nor the files of its var dir (on the
embedded setup the master's SQLite database is there: ``manage.py serve`` gives the agent the
master's ``HEADWAY_VAR_DIR``).

The runner runs in this process as a host of a live server (``host_agent``): the run is placed
on that host, and everything goes over REST with its host token.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from registry import lifecycle
from registry.models import Trial, TrialLog
from tests.helpers import REPO, make_tar_gz, reload, run_python
from tests.helpers_checkpoints import allow_storage
from workers import config, isolation, runner
from workers.config import AgentConfigError

pytestmark = pytest.mark.usefixtures("fresh_supervision")

# What the agent's environment holds (set in this process, which runs the agent's runner) and
# no trial may see: the host's own secrets, and a server's, should an operator leave them there.
HOST_SECRETS = {
    "HEADWAY_HOST_TOKEN": "hwh_host-secret",  # replaced by the host's real token in run_probe
    "HEADWAY_BROKER_URL": "redis://:pw@redis:6379/0",
    "REDIS_URL": "redis://:pw@redis:6379/0",
    "AWS_ACCESS_KEY_ID": "AKIAWORKER",
    "AWS_SECRET_ACCESS_KEY": "worker-s3-secret",
}
SERVER_SECRETS = {
    "SECRET_KEY": "server-secret-key",
    "DATABASE_URL": "postgres://headway:pw@db/headway",
    "DJANGO_SETTINGS_MODULE": "config.settings",
}
SECRETS = {**HOST_SECRETS, **SERVER_SECRETS}

# Prints what a trial can reach: its environment, its uid, and whether it can read the files
# named on its command line (the worker's /proc environ, a file of its var dir) and write a
# checkpoint.
PROBE = """
import json, os, sys
def readable(path):
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        return True
    except OSError as exc:
        return type(exc).__name__
checkpoint = os.path.join(sys.argv[3], "probe-checkpoint")
os.makedirs(checkpoint, exist_ok=True)
seen = {
    "env": dict(os.environ),
    "uid": os.getuid(),
    "worker_environ": readable(f"/proc/{sys.argv[1]}/environ"),
    "database": readable(sys.argv[2]),
    "checkpoint_written": os.path.isdir(checkpoint),
}
print("PROBE " + json.dumps(seen))
"""
# The same in sh, for the trial user: this machine's Python may live where that user cannot go
# (a pyenv under /root); in the Docker image it is under /usr/local.
PROBE_SH = """
readable() { if head -c1 "$1" >/dev/null 2>&1; then echo true; else echo PermissionError; fi; }
mkdir -p "$3/probe-checkpoint"
printf 'PROBE {"uid": %s, "worker_environ": "%s", "database": "%s", "checkpoint_written": %s, ' \\
  "$(id -u)" "$(readable /proc/$1/environ)" "$(readable "$2")" \\
  "$(test -d "$3/probe-checkpoint" && echo true || echo false)"
printf '"env": {"USER": "%s", "SECRET_KEY": "%s", "DATABASE_URL": "%s", ' \\
  "$USER" "${SECRET_KEY-}" "${DATABASE_URL-}"
printf '"HEADWAY_HOST_TOKEN": "%s", "HEADWAY_BROKER_URL": "%s", "REDIS_URL": "%s"}}\\n' \\
  "${HEADWAY_HOST_TOKEN-}" "${HEADWAY_BROKER_URL-}" "${REDIS_URL-}"
"""


@pytest.fixture
def base_dir(host_agent):
    """The agent's var dir, one another user can cross (pytest's tmp_path is private to
    root), with a SQLite file standing in for the embedded setup's database (the master's,
    in the var dir the agent shares with it)."""
    base = Path(tempfile.mkdtemp(prefix="headway-isolation-"))
    base.chmod(0o711)
    var = base / "var"
    var.mkdir()
    config.configure(
        VAR_DIR=var,
        HEADWAY_WORK_DIR=var / "work",
        HEADWAY_CHECKPOINT_DIR=var / "checkpoints",
        HEADWAY_LOG_FLUSH_SECONDS=0.05,
        HEADWAY_HEARTBEAT_SECONDS=3600.0,
        HEADWAY_TRIAL_USER="",
        HEADWAY_TRIAL_ENV=[],
    )
    (var / "headway.sqlite3").write_bytes(b"SQLite format 3\0 every user's token")
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def run_probe(base_dir, host_agent, django_user_model, monkeypatch):
    """Run a probe trial (``storage``: its checkpoint_storage) on the agent's host with the
    secrets in the agent's environment; return what the probe saw."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HEADWAY_HOST_TOKEN", host_agent.token)  # as the agent is started
    owner = django_user_model.objects.create_user("isolation-owner")
    host_agent.register(slots=1)

    def run(storage: dict | None = None, probe: str = "python probe.py") -> dict:
        settings = config.settings
        database = settings.VAR_DIR / "headway.sqlite3"
        command = f"{probe} {os.getpid()} {database} {settings.HEADWAY_CHECKPOINT_DIR}"
        source = {
            "entrypoint": command,
            "searcher": {"name": "single", "metric": "loss", "max_length": 5},
            "max_restarts": 0,
        }
        if storage is not None:
            source["checkpoint_storage"] = allow_storage(storage)
        experiment = lifecycle.experiment_create(
            owner=owner,
            config_source=source,
            model_definition=make_tar_gz({"probe.py": PROBE, "probe.sh": PROBE_SH}),
        )
        trial = Trial.objects.get(experiment=experiment)
        settings.HEADWAY_CHECKPOINT_DIR.mkdir(parents=True, exist_ok=True)
        exit_code = runner.run_trial(trial.id, reload(trial).run_id)
        lines = TrialLog.objects.filter(trial=trial).values_list("message", flat=True)
        probes = [line for line in lines if line.startswith("PROBE ")]
        assert exit_code == 0 and probes, list(lines)
        return json.loads(probes[0].removeprefix("PROBE "))

    return run


def test_finding_trial_code_has_the_worker_privileges_env_holds_no_server_secret(
    run_probe, monkeypatch, host_agent
):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("WANDB_API_KEY", "operator-chosen")
    monkeypatch.setenv("SOMETHING_ELSE", "dropped")
    config.configure(HEADWAY_TRIAL_ENV=["WANDB_API_KEY"])
    env = run_probe()["env"]
    assert not set(SECRETS) & set(env), sorted(env)
    assert host_agent.token not in json.dumps(env)  # under no other name either
    assert "SOMETHING_ELSE" not in env
    # Accelerator settings and what the operator listed in HEADWAY_TRIAL_ENV still pass.
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["NCCL_DEBUG"] == "INFO"
    assert env["WANDB_API_KEY"] == "operator-chosen"
    # The trial's own credential is the run's token, not the host's.
    assert env["HEADWAY_TOKEN"] and env["HEADWAY_TOKEN"] != host_agent.token
    assert env["HEADWAY_MASTER"] == host_agent.url


def test_finding_trial_code_has_the_worker_privileges_s3_keys_only_for_s3_storage(run_probe):
    env = run_probe({"type": "s3", "bucket": "team-checkpoints"})["env"]
    # The trial uploads its checkpoints itself, so it gets the storage keys, and nothing else.
    assert env["AWS_ACCESS_KEY_ID"] == "AKIAWORKER"
    assert env["AWS_SECRET_ACCESS_KEY"] == "worker-s3-secret"
    assert not (set(SECRETS) - {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) & set(env)


def _runs_as(user: str, python: str, **env: str) -> bool:
    """Whether ``user`` can start ``python`` and import the worker's trial guard."""
    try:
        probe = subprocess.run(
            [python, "-c", "import headway.exec.guard"],
            user=user,
            env={"PATH": os.environ["PATH"], **env},
            cwd="/",
            capture_output=True,
            check=False,
        )
    except PermissionError:
        return False
    return probe.returncode == 0


@pytest.fixture
def trial_user(base_dir, monkeypatch):
    """A throwaway Unix user for ``HEADWAY_TRIAL_USER`` (needs root to create and to use).

    Trials start through the worker's interpreter, which that user must be able to run (the
    Docker image's /opt/venv is). Where it cannot (a pyenv under /root), the system Python
    with the repository on ``PYTHONPATH`` stands in for it.
    """
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("HEADWAY_TRIAL_USER needs root (and useradd) to be tested")
    name = f"hwtrial{os.getpid()}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", name],
        check=True,
    )
    try:
        if not _runs_as(name, sys.executable):
            system_python = "/usr/bin/python3"
            if not _runs_as(name, system_python, PYTHONPATH=str(REPO)):
                pytest.skip(f"user {name} can run neither {sys.executable} nor {system_python}")
            monkeypatch.setattr(sys, "executable", system_python)
            monkeypatch.setenv("PYTHONPATH", str(REPO))
        config.configure(HEADWAY_TRIAL_USER=name)
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False)


def test_finding_trial_code_has_the_worker_privileges_trial_user_cannot_read_worker_secrets(
    run_probe, trial_user
):
    settings = config.settings
    seen = run_probe(probe="sh probe.sh")
    assert seen["uid"] == trial_user.pw_uid
    assert not any(seen["env"][name] for name in SECRETS if name in seen["env"]), seen["env"]
    assert seen["env"]["USER"] == trial_user.pw_name
    # The agent's environment (its host token, broker URL) and the files of its var dir (the
    # embedded setup's SQLite database) are out of its reach...
    assert seen["worker_environ"] == "PermissionError"
    assert seen["database"] == "PermissionError"
    # ... while its shared_fs checkpoints can still be written.
    assert seen["checkpoint_written"] is True
    assert (settings.HEADWAY_CHECKPOINT_DIR / "probe-checkpoint").stat().st_uid == trial_user.pw_uid
    # Group-writable for a web server in the trial user's group, read-only for others.
    assert settings.HEADWAY_CHECKPOINT_DIR.stat().st_mode & 0o7777 == 0o2775


def test_a_missing_trial_user_is_refused_naming_the_setting(monkeypatch):
    monkeypatch.setattr(config.settings, "HEADWAY_TRIAL_USER", "no-such-user-headway")
    with pytest.raises(AgentConfigError, match="HEADWAY_TRIAL_USER"):
        isolation.trial_user()


def test_the_trial_user_must_differ_from_the_worker(monkeypatch):
    monkeypatch.setattr(config.settings, "HEADWAY_TRIAL_USER", str(os.geteuid()))
    with pytest.raises(AgentConfigError, match="worker's own user"):
        isolation.trial_user()


def test_the_worker_refuses_to_start_with_a_trial_user_it_cannot_use(tmp_path):
    env = dict(
        os.environ,
        HEADWAY_MASTER="http://127.0.0.1:9",  # never reached: the check stops it first
        HEADWAY_HOST_TOKEN="hwh_unused",
        HEADWAY_TRIAL_USER="no-such-user-headway",
        HEADWAY_VAR_DIR=str(tmp_path),
    )
    proc = run_python(["-m", "workers"], env)
    assert proc.returncode != 0
    assert "HEADWAY_TRIAL_USER: no user 'no-such-user-headway'" in proc.stderr
