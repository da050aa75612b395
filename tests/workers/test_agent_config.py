"""The host agent's settings (``workers.config``) and its entry point (``python -m workers``):
what a worker host cannot start without, malformed values named in the error, the master's
timing adopted from a heartbeat answer, and an agent that imports with no Django, no server
code and an unreachable ``DATABASE_URL`` in its environment."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.helpers import REPO, run_python
from workers import config
from workers.config import AgentConfigError, AgentSettings

# Where no database is: an import that tried to connect would hang or fail on it.
NOWHERE = "postgres://nobody@10.255.255.1:1/x"
# What the agent's environment may hold that is not its own (set by the tests below).
AGENT_VARIABLES = (
    "HEADWAY_MASTER",
    "HEADWAY_MASTER_URL",
    "HEADWAY_HOST_TOKEN",
    "HEADWAY_SLOTS",
    "HEADWAY_HOST_NAME",
    "HEADWAY_TRIAL_USER",
    "HEADWAY_HOST_ADDRESS",
)


def _agent_env(tmp_path: Path, **values: str) -> dict[str, str]:
    """This process's environment less the agent's own variables, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if k not in AGENT_VARIABLES}
    env.update(HEADWAY_VAR_DIR=str(tmp_path), DATABASE_URL=NOWHERE, **values)
    return env


def _python_m_workers(env: dict[str, str]) -> subprocess.CompletedProcess:
    return run_python(["-m", "workers"], env)


def test_python_m_workers_without_master_and_token_names_both(tmp_path):
    done = _python_m_workers(_agent_env(tmp_path))
    assert done.returncode != 0
    assert "a worker host needs HEADWAY_MASTER and HEADWAY_HOST_TOKEN" in done.stderr
    assert "it never reads database settings" in done.stderr
    assert "Traceback" not in done.stderr
    assert "Host " not in done.stdout  # it stopped before detecting the host and Celery


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"HEADWAY_MASTER": "http://master:8000"}, "HEADWAY_HOST_TOKEN"),
        ({"HEADWAY_HOST_TOKEN": "hwh_key"}, "HEADWAY_MASTER"),
    ],
)
def test_python_m_workers_names_the_one_setting_missing(tmp_path, given, missing):
    done = _python_m_workers(_agent_env(tmp_path, **given))
    assert done.returncode != 0
    assert f"a worker host needs {missing} (docs/deployment.md" in done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("HEADWAY_SLOTS", "two", "HEADWAY_SLOTS must be an integer, got 'two'"),
        ("HEADWAY_SLOTS", "-1", "HEADWAY_SLOTS must be 0 or more, got -1"),
        (
            "HEADWAY_HOST_NAME",
            "gpu a/1",
            "HEADWAY_HOST_NAME must be letters, digits, '.', '_' or '-', got 'gpu a/1'",
        ),
        ("HEADWAY_LEASE_SECONDS", "soon", "HEADWAY_LEASE_SECONDS must be a number, got 'soon'"),
    ],
)
def test_python_m_workers_names_a_malformed_setting(tmp_path, variable, value, message):
    env = _agent_env(
        tmp_path,
        HEADWAY_MASTER="http://master:8000",
        HEADWAY_HOST_TOKEN="hwh_key",
        **{variable: value},
    )
    done = _python_m_workers(env)
    assert done.returncode != 0
    assert f"headway worker: {message}" in done.stderr
    assert "Traceback" not in done.stderr


def _settings(monkeypatch, env: dict[str, str]) -> AgentSettings:
    """``AgentSettings`` read from an environment of exactly ``env`` (Headway's variables)."""
    for name in list(os.environ):
        if name.startswith("HEADWAY_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return AgentSettings()


def test_settings_read_the_environment(monkeypatch):
    settings = _settings(
        monkeypatch,
        {
            "HEADWAY_MASTER_URL": "http://master:8000/",  # the older name works too
            "HEADWAY_HOST_TOKEN": "hwh_key",
            "REDIS_URL": "redis://broker:6379/0",
            "HEADWAY_SLOTS": "3",
            "HEADWAY_HOST_NAME": "gpu-a",
            "HEADWAY_TRIAL_ENV": "WANDB_API_KEY, ,HF_TOKEN",
        },
    )
    assert settings.HEADWAY_MASTER_URL == "http://master:8000"
    assert settings.BROKER_URL == "redis://broker:6379/0"
    assert (settings.HEADWAY_SLOTS, settings.HEADWAY_HOST_NAME) == (3, "gpu-a")
    assert settings.HEADWAY_TRIAL_ENV == ["WANDB_API_KEY", "HF_TOKEN"]
    settings.require_master()  # both present: no error
    preferred = _settings(
        monkeypatch, {"HEADWAY_MASTER": "http://a:1", "HEADWAY_MASTER_URL": "http://b:2"}
    )
    assert preferred.HEADWAY_MASTER_URL == "http://a:1"
    assert _settings(monkeypatch, {}).HEADWAY_SLOTS is None  # the GPUs, else one CPU slot
    with pytest.raises(AgentConfigError, match="needs HEADWAY_MASTER and HEADWAY_HOST_TOKEN"):
        _settings(monkeypatch, {}).require_master()


def test_the_host_adopts_the_masters_timing(monkeypatch):
    settings = _settings(
        monkeypatch,
        {
            "HEADWAY_HOST_HEARTBEAT_SECONDS": "10",
            "HEADWAY_LEASE_SECONDS": "30",
            "HEADWAY_KILL_GRACE_SECONDS": "10",
        },
    )
    settings.adopt_timing(heartbeat_seconds=0.5, lease_seconds=6.0, kill_grace_seconds=2.0)
    assert (
        settings.HEADWAY_HOST_HEARTBEAT_SECONDS,
        settings.HEADWAY_LEASE_SECONDS,
        settings.HEADWAY_KILL_GRACE_SECONDS,
    ) == (0.5, 6.0, 2.0)


def test_configure_sets_only_known_settings_and_reload_reads_again(monkeypatch):
    saved = dict(config.settings.__dict__)
    try:
        config.configure(HEADWAY_SLOTS=5)
        assert config.settings.HEADWAY_SLOTS == 5
        with pytest.raises(AgentConfigError, match="no host agent setting HEADWAY_SLOT"):
            config.configure(HEADWAY_SLOT=5)
        same = config.settings
        monkeypatch.setenv("HEADWAY_SLOTS", "2")
        monkeypatch.setenv("HEADWAY_QUEUE", "ns")
        assert config.reload() is same
        assert (same.HEADWAY_SLOTS, same.HEADWAY_QUEUE) == (2, "ns")
    finally:
        config.settings.__dict__.update(saved)


# Imports the agent's modules with the named top-level packages refused (a meta-path finder
# raising ImportError), as on a GPU host without the server's packages; prints what was asked
# for and what got imported.
BLOCKED_IMPORT = """
import importlib.abc, json, sys

BLOCKED = set(sys.argv[1:])
asked = []


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            asked.append(name)
            raise ImportError(f"No module named {name!r} (not on a worker host)")
        return None


sys.meta_path.insert(0, Absent())
import workers.tasks, workers.runner, workers.hosts
from workers.celery import app

app.loader.import_default_modules()  # what the worker does at start (its task modules)
loaded = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
print(json.dumps({"asked": asked, "loaded": loaded}))
"""


def _agent_contract_forbidden() -> list[str]:
    """The top-level packages the host agent's import contract forbids (pyproject.toml)."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (agent,) = [c for c in contracts["contracts"] if c.get("source_modules") == ["workers"]]
    return sorted({module.split(".")[0] for module in agent["forbidden_modules"]})


def test_the_agent_imports_without_django_or_the_server(tmp_path):
    blocked = _agent_contract_forbidden()
    assert {"django", "registry", "config", "psycopg"} <= set(blocked)
    # DJANGO_SETTINGS_MODULE as manage.py serve leaves it in the agent's environment.
    env = _agent_env(tmp_path, DJANGO_SETTINGS_MODULE="config.settings")
    done = run_python(["-c", BLOCKED_IMPORT, *blocked], env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == []
    # Only optional imports of third-party packages may ask for Django (kombu's JSON encoder
    # tries django.utils.functional); nothing asks for the server's code or a database driver.
    assert {name.split(".")[0] for name in seen["asked"]} <= {"django"}, seen["asked"]


# The same imports with Django installed and DJANGO_SETTINGS_MODULE set: the agent's Celery app
# must not set Django up (Celery's Django fixup would import the server's settings).
UNBLOCKED_IMPORT = """
import json, sys
import workers.tasks, workers.runner, workers.hosts
from workers.celery import app

app.loader.import_default_modules()
server = sorted(m for m in sys.modules if m.split(".")[0] in ("config", "registry", "dashboard"))
print(json.dumps({"server": server, "db": sorted(m for m in sys.modules if "psycopg" in m)}))
"""


def test_the_agent_never_sets_django_up_even_when_its_settings_module_is_named(tmp_path):
    env = _agent_env(tmp_path, DJANGO_SETTINGS_MODULE="config.settings")
    done = run_python(["-c", UNBLOCKED_IMPORT], env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"server": [], "db": []}
