"""A worker host joins one resource pool (``HEADWAY_RESOURCE_POOL``): one the master's pools
file does not list makes the master refuse the host's first heartbeat (400, naming the pool and
the known pools), and the host agent stops at start (``WorkerShutdown``) with that message,
before any host is registered.

The agent runs as a real process against a live server in this process (whose settings name
the pools file), started as ``python -m workers`` (what ``manage.py worker`` execs) and as its
Celery worker directly (``tests.helpers.start_worker``, as ``make serve`` and the tests do).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.helpers import (
    host_token,
    require,
    spawn_python,
    start_worker,
    stop_workers,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

POOLS = "- {name: big, type: agent}\n"
# The master's 400 (the field and the known pools), as the agent logs it when it stops.
EXPECTED = "pool: unknown resource pool 'huge'; the resource pools: default, big"
# The agent's exit: from its checks to Celery's shutdown, with margin for a busy machine.
EXIT_BOUND_S = 120


@pytest.fixture
def env(live_server, settings, tmp_path):
    """The environment of a host agent of the live server whose pool (``huge``) is not in the
    master's pools file (``default``, ``big``)."""
    require(bool(settings.REDIS_URL), "needs Redis: set REDIS_URL")
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS)
    settings.HEADWAY_RESOURCE_POOLS = str(pools)  # the master's (the live server's) file
    name = f"pools-{uuid.uuid4().hex[:8]}"
    env = dict(
        os.environ,
        REDIS_URL=settings.REDIS_URL,
        HEADWAY_MASTER_URL=live_server.url,
        HEADWAY_RESOURCE_POOL="huge",
        HEADWAY_QUEUE=f"pools-{uuid.uuid4().hex[:8]}",
        HEADWAY_HOST_NAME=name,
        HEADWAY_SLOTS="1",
        HEADWAY_VAR_DIR=str(tmp_path / "var"),
    )
    env.pop("HEADWAY_TRIAL_USER", None)
    env.pop("HEADWAY_RESOURCE_POOLS", None)  # the agent never reads the pools file
    return env


def _stopped_by_itself(proc: subprocess.Popen, log: Path) -> str:
    """Wait for the agent to exit by itself; return its output (the test fails on a hang)."""
    try:
        proc.wait(timeout=EXIT_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"the agent did not stop by itself:\n{log.read_text()[-3000:]}")
    return log.read_text()


def _no_host(name: str) -> None:
    from registry.models import WorkerHost

    assert not WorkerHost.objects.filter(name=name).exists()


def test_python_m_workers_stops_at_start_on_an_unknown_pool(env, tmp_path):
    from registry.management.services import agent_environment

    name = env["HEADWAY_HOST_NAME"]
    agent_env = agent_environment(env, host_token(name), env["HEADWAY_MASTER_URL"])
    log = tmp_path / "agent.log"
    proc = spawn_python(["-m", "workers"], agent_env, log)
    text = _stopped_by_itself(proc, log)
    assert proc.returncode != 0, text
    assert f"Host {name}: 1 CPU slot(s)" in text  # its own checks passed: the master refused
    assert f"{EXPECTED}: this worker stops" in text, text
    _no_host(name)


def test_a_celery_agent_with_an_unknown_pool_stops_by_itself(env, tmp_path):
    """Started as ``celery -A workers worker`` directly, the agent stops when it gets ready,
    at its first heartbeat, before a host is registered."""
    name = env["HEADWAY_HOST_NAME"]
    log = tmp_path / "agent.log"
    proc = start_worker(env, log, env["HEADWAY_QUEUE"], name, concurrency=2)
    text = _stopped_by_itself(proc, log)
    assert proc.returncode != 0, text
    assert f"{EXPECTED}: this worker stops" in text, text
    _no_host(name)


def test_the_same_agent_in_a_listed_pool_registers_its_host(env, tmp_path):
    """The control: with ``HEADWAY_RESOURCE_POOL=big`` the same agent registers its host in
    that pool and keeps running."""
    from registry.models import WorkerHost

    env["HEADWAY_RESOURCE_POOL"] = "big"
    name = env["HEADWAY_HOST_NAME"]
    proc = start_worker(env, tmp_path / "agent.log", env["HEADWAY_QUEUE"], name, concurrency=2)
    try:
        host = wait_for(
            lambda: WorkerHost.objects.filter(name=name).first(), 120, "the host to register"
        )
        assert host.pool == "big"
        assert proc.poll() is None
    finally:
        stop_workers([proc])
