"""The variables the master and the host agents share are read once, the same way on both sides
(``headway.cluster_settings.SharedSettings``): from one environment the master's Django settings
and an agent's ``AgentSettings`` hold equal values, and a bad value stops either naming the
variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from headway.cluster_settings import SettingsError, SharedSettings
from tests.helpers import REPO
from workers.config import AgentConfigError, AgentSettings

# Where each side keeps a shared variable when not under the variable's own name.
MASTER_NAMES = {
    "HEADWAY_VAR_DIR": "VAR_DIR",
    "HEADWAY_QUEUE": "CELERY_TASK_DEFAULT_QUEUE",
    "HEADWAY_VISIBILITY_TIMEOUT": "CELERY_BROKER_TRANSPORT_OPTIONS",  # ["visibility_timeout"]
}
AGENT_NAMES = {"HEADWAY_VAR_DIR": "VAR_DIR"}

# Prints {variable: [the master's value, the agent's value]} for every shared variable.
BOTH_SIDES = f"""
import json, django
django.setup()
from django.conf import settings as master
from headway.cluster_settings import SharedSettings
from workers.config import AgentSettings
agent = AgentSettings()
master_names, agent_names = {MASTER_NAMES!r}, {AGENT_NAMES!r}
values = {{}}
for name in SharedSettings.model_fields:
    mine = getattr(master, master_names.get(name, name))
    if name == "HEADWAY_VISIBILITY_TIMEOUT":
        mine = mine["visibility_timeout"]
    values[name] = [mine, getattr(agent, agent_names.get(name, name))]
print(json.dumps(values, default=str))
"""


def _environment(var_dir: Path, **values: str) -> dict[str, str]:
    """This process's environment without Headway's variables, plus ``values``; a Redis broker
    URL so the master's transport options carry the visibility timeout (nothing connects)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "HEADWAY_VAR_DIR": str(var_dir),
        **values,
    }


def _both_sides(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BOTH_SIDES],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _agent_settings(monkeypatch, env: dict[str, str]) -> AgentSettings:
    for name in list(os.environ):
        if name.startswith("HEADWAY_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return AgentSettings()


EVERY_VARIABLE_SET = {
    "HEADWAY_WORK_DIR": "{tmp}/work-here",
    "HEADWAY_CHECKPOINT_DIR": "{tmp}/checkpoints-here",
    "HEADWAY_QUEUE": "cluster-b",
    "HEADWAY_VISIBILITY_TIMEOUT": "99",
    "HEADWAY_RESOURCE_POOL": "gpus",
    "HEADWAY_HOST_NAME": "gpu-7",
    "HEADWAY_SLOTS": "3",
    "HEADWAY_HOST_ADDRESS": "10.0.0.7",
    "HEADWAY_TRIAL_USER": "trials",
    "HEADWAY_TRIAL_ENV": "WANDB_API_KEY, ,HF_HOME",
    "HEADWAY_THREADS_PER_SLOT": "2",
    "HEADWAY_KILL_GRACE_SECONDS": "3",
    "HEADWAY_HEARTBEAT_SECONDS": "4",
    "HEADWAY_HEARTBEAT_TIMEOUT_SECONDS": "90.5",
    "HEADWAY_HOST_HEARTBEAT_SECONDS": "7",
    "HEADWAY_LEASE_SECONDS": "40",
    "HEADWAY_OUTAGE_TOLERANCE_SECONDS": "700",
    "HEADWAY_LOG_FLUSH_SECONDS": "0.25",
    "HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS": "120",
    "HEADWAY_MAX_LOG_LINE_CHARS": "1000",
    "HEADWAY_MAX_MODEL_DEF_BYTES": "1048576",
    "HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS": "5",
    "HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES": "2147483648",
}


def test_every_variable_set_covers_every_shared_variable():
    assert set(EVERY_VARIABLE_SET) | {"HEADWAY_VAR_DIR"} == set(SharedSettings.model_fields)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param({}, {"HEADWAY_LEASE_SECONDS": 30.0, "HEADWAY_QUEUE": "headway"}, id="unset"),
        pytest.param(
            EVERY_VARIABLE_SET,
            {"HEADWAY_SLOTS": 3, "HEADWAY_TRIAL_ENV": ["WANDB_API_KEY", "HF_HOME"]},
            id="every-variable-set",
        ),
        # The derived defaults: the lease from the host heartbeat, the tolerance from the lease.
        pytest.param(
            {"HEADWAY_HOST_HEARTBEAT_SECONDS": "300"},
            {"HEADWAY_LEASE_SECONDS": 900.0, "HEADWAY_OUTAGE_TOLERANCE_SECONDS": 900.0},
            id="derived-defaults",
        ),
    ],
)
def test_the_master_and_a_host_read_the_same_values(tmp_path, given, expected):
    given = {name: value.format(tmp=tmp_path) for name, value in given.items()}
    done = _both_sides(_environment(tmp_path, **given))
    assert done.returncode == 0, done.stderr
    values = json.loads(done.stdout)
    assert set(values) == set(SharedSettings.model_fields)
    for name, (master, agent) in values.items():
        assert master == agent, name
    for name, value in expected.items():
        assert values[name][0] == value, name
    for name in ("HEADWAY_WORK_DIR", "HEADWAY_CHECKPOINT_DIR"):
        if name in given:
            assert values[name][0] == str(Path(given[name]).resolve())
    assert values["HEADWAY_VAR_DIR"][0] == str(tmp_path.resolve())


BAD_VALUES = [
    ("HEADWAY_SLOTS", "two", "HEADWAY_SLOTS must be an integer, got 'two'"),
    ("HEADWAY_SLOTS", "-1", "HEADWAY_SLOTS must be 0 or more, got -1"),
    (
        "HEADWAY_HOST_NAME",
        "gpu a/1",
        "HEADWAY_HOST_NAME must be letters, digits, '.', '_' or '-', got 'gpu a/1'",
    ),
    ("HEADWAY_LEASE_SECONDS", "soon", "HEADWAY_LEASE_SECONDS must be a number, got 'soon'"),
    (
        "HEADWAY_HOST_HEARTBEAT_SECONDS",
        "0",
        "HEADWAY_HOST_HEARTBEAT_SECONDS must be above 0, got 0",
    ),
    ("HEADWAY_VISIBILITY_TIMEOUT", "0", "HEADWAY_VISIBILITY_TIMEOUT must be 1 or more, got 0"),
    (
        "HEADWAY_MAX_MODEL_DEF_BYTES",
        "32MiB",
        "HEADWAY_MAX_MODEL_DEF_BYTES must be an integer, got '32MiB'",
    ),
]


# Read by the master alone (config/env.py's envfloat).
MASTER_ONLY_BAD_VALUES = [
    (
        "HEADWAY_REAPER_INTERVAL_SECONDS",
        "0",
        "HEADWAY_REAPER_INTERVAL_SECONDS must be at least 0.1, got 0",
    ),
    (
        "HEADWAY_LOST_BACKOFF_SECONDS",
        "ten",
        "HEADWAY_LOST_BACKOFF_SECONDS must be a number, got 'ten'",
    ),
    (
        "HEADWAY_LOST_BACKOFF_MAX_SECONDS",
        "-1",
        "HEADWAY_LOST_BACKOFF_MAX_SECONDS must be at least 0, got -1",
    ),
    (
        "HEADWAY_LEASE_MARGIN_SECONDS",
        "inf",
        "HEADWAY_LEASE_MARGIN_SECONDS must be a finite number, got 'inf'",
    ),
    (
        "HEADWAY_WEBHOOK_TIMEOUT_SECONDS",
        "0",
        "HEADWAY_WEBHOOK_TIMEOUT_SECONDS must be at least 0.1, got 0",
    ),
]


@pytest.mark.parametrize(("variable", "value", "message"), BAD_VALUES + MASTER_ONLY_BAD_VALUES)
def test_a_bad_value_stops_the_master_naming_the_variable(tmp_path, variable, value, message):
    done = _both_sides(_environment(tmp_path, **{variable: value}))
    assert done.returncode != 0
    assert done.stderr.splitlines()[-1] == f"django.core.exceptions.ImproperlyConfigured: {message}"


@pytest.mark.parametrize(("variable", "value", "message"), BAD_VALUES)
def test_a_bad_value_stops_a_host_naming_the_variable(monkeypatch, variable, value, message):
    with pytest.raises(AgentConfigError) as caught:
        _agent_settings(monkeypatch, {variable: value})
    assert str(caught.value) == message


def test_every_wrong_variable_is_named_at_once(monkeypatch):
    for name in list(os.environ):
        if name.startswith("HEADWAY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HEADWAY_KILL_GRACE_SECONDS", "-1")
    monkeypatch.setenv("HEADWAY_THREADS_PER_SLOT", "many")
    with pytest.raises(SettingsError) as caught:
        SharedSettings.from_environment()
    assert str(caught.value) == (
        "HEADWAY_THREADS_PER_SLOT must be an integer, got 'many'; "
        "HEADWAY_KILL_GRACE_SECONDS must be 0 or more, got -1"
    )


def test_an_empty_variable_is_unset(monkeypatch):
    for name in list(os.environ):
        if name.startswith("HEADWAY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HEADWAY_SLOTS", "")
    monkeypatch.setenv("HEADWAY_QUEUE", "")
    shared = SharedSettings.from_environment()
    assert (shared.HEADWAY_SLOTS, shared.HEADWAY_QUEUE) == (None, "headway")


def test_every_shared_variable_is_described():
    for name, field in SharedSettings.model_fields.items():
        assert field.description, name
