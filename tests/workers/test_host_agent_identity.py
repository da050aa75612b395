"""One agent per host, and an agent whose token is revoked stops: each agent process sends an
instance id (with its pid and address) with every heartbeat; the master refuses a second agent
of a host whose agent still heartbeats (409 naming it), and accepts a new one once the old one
stopped or went silent for the host timeout. A refused or revoked agent ends its leases (its
trials stop) and exits.

In-process heartbeats (``host_agent``: this process as a host of a live server) and real
Celery agents (``tests.helpers.start_worker``) against the live server.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from celery.exceptions import WorkerShutdown
from django.utils import timezone

from headway.client import ConflictError
from registry.models import WorkerHost
from tests.helpers import host_token, require, start_worker, stop_workers, wait_for
from workers import config, hosts, leases

EXIT_BOUND_S = 120  # an agent's exit by itself, with margin for a busy machine


@pytest.fixture
def no_leases(monkeypatch):
    monkeypatch.setattr(leases, "_held", {})


def _beat(agent, on_refused=None) -> hosts.HostHeartbeat:
    spec = hosts.HostSpec(agent.name, 1, ("cpu0",), False)
    return hosts.HostHeartbeat(spec, 3600, on_refused=on_refused)


def test_a_second_agent_of_a_live_host_is_refused_naming_the_first(host_agent, no_leases):
    first, second = _beat(host_agent), _beat(host_agent)
    assert first.renew()
    with pytest.raises(ConflictError) as refused:
        second.renew()
    text = str(refused.value.body)
    assert f"instance {first.agent_id}" in text and f"pid {os.getpid()}" in text
    assert first.agent_address in text
    assert WorkerHost.objects.get(name=host_agent.name).agent_id == first.agent_id
    assert first.renew()  # the holder goes on


def test_a_new_agent_is_accepted_once_the_old_one_stopped_or_went_silent(
    host_agent, no_leases, settings
):
    first, second, third = _beat(host_agent), _beat(host_agent), _beat(host_agent)
    assert first.renew()
    host_agent.api.host_stopped()  # the first agent's warm shutdown
    assert second.renew()
    assert WorkerHost.objects.get(name=host_agent.name).agent_id == second.agent_id
    with pytest.raises(ConflictError):
        third.renew()
    silent = timezone.now() - timedelta(seconds=settings.HEADWAY_HOST_TIMEOUT_SECONDS + 1)
    WorkerHost.objects.filter(name=host_agent.name).update(heartbeat_at=silent)  # it crashed
    assert third.renew()
    assert WorkerHost.objects.get(name=host_agent.name).agent_id == third.agent_id


def test_the_refused_agent_stops_the_celery_worker_at_start(host_agent, no_leases, monkeypatch):
    assert _beat(host_agent).renew()
    monkeypatch.setattr(hosts, "_current", None)
    config.configure(HEADWAY_SLOTS=1)
    with pytest.raises(WorkerShutdown, match="is already served by another agent"):
        hosts.start()
    assert hosts._current is None


def test_an_agent_that_lost_its_host_to_another_stops_its_trials(host_agent, no_leases, settings):
    """The first agent went silent (a partition), a second took the host over; when the first
    comes back its beat is refused: its leases end and it gives up."""
    gave_up: list[str] = []
    first = _beat(host_agent, on_refused=gave_up.append)
    assert first.renew()
    lease = leases.hold(leases.RUN, trial_id=1, run_id=1, node_rank=0, claimed=time.monotonic())
    silent = timezone.now() - timedelta(seconds=settings.HEADWAY_HOST_TIMEOUT_SECONDS + 1)
    WorkerHost.objects.filter(name=host_agent.name).update(heartbeat_at=silent)
    assert _beat(host_agent).renew()
    assert not first.renew()
    assert lease.expired and "another agent took this host over" in lease.expired
    assert len(gave_up) == 1 and "is already served by another agent" in gave_up[0]


def test_a_revoked_token_ends_the_leases_then_gives_up_once(host_agent, no_leases):
    from registry.lifecycle.host_tokens import host_token_revoke

    gave_up: list[str] = []
    beat = _beat(host_agent, on_refused=gave_up.append)
    assert beat.renew()
    lease = leases.hold(leases.RUN, trial_id=1, run_id=1, node_rank=0, claimed=time.monotonic())
    host_token_revoke(host_agent.name)
    assert not beat.renew()
    assert not beat.renew()
    assert lease.expired == beat.refused and host_agent.name in lease.expired
    assert gave_up == [f"host token revoked: {lease.expired}"]


def test_an_unknown_token_ends_the_leases_and_waits_to_be_accepted_again(host_agent, no_leases):
    # A key the master does not know (not issued yet; its row gone, as a test database's flush
    # leaves it) is not a revocation: the leases end, the agent stays and is accepted again.
    from registry.models import HostToken

    gave_up: list[str] = []
    beat = _beat(host_agent, on_refused=gave_up.append)
    assert beat.renew()
    lease = leases.hold(leases.RUN, trial_id=1, run_id=1, node_rank=0, claimed=time.monotonic())
    key = host_agent.token
    HostToken.objects.filter(name=host_agent.name).delete()
    assert not beat.renew()
    assert lease.expired == beat.refused and "Invalid host token" in lease.expired
    assert gave_up == []
    host_token(host_agent.name, key)
    assert beat.renew()


# -- real agents ---------------------------------------------------------------------------------


@pytest.fixture
def env(live_server, settings, tmp_path):
    """A host agent's environment for the live server, heartbeating every second."""
    require(bool(settings.REDIS_URL), "needs Redis: set REDIS_URL")
    settings.HEADWAY_HOST_HEARTBEAT_SECONDS = 1.0  # the agents adopt the master's
    env = dict(
        os.environ,
        REDIS_URL=settings.REDIS_URL,
        HEADWAY_MASTER_URL=live_server.url,
        HEADWAY_QUEUE=f"ident-{uuid.uuid4().hex[:8]}",
        HEADWAY_HOST_NAME=f"ident-{uuid.uuid4().hex[:8]}",
        HEADWAY_SLOTS="1",
        HEADWAY_VAR_DIR=str(tmp_path / "var"),
    )
    env.pop("HEADWAY_TRIAL_USER", None)
    return env


def _exited_by_itself(proc: subprocess.Popen, log: Path) -> str:
    try:
        proc.wait(timeout=EXIT_BOUND_S)
    except subprocess.TimeoutExpired:
        stop_workers([proc])
        pytest.fail(f"the agent did not stop by itself:\n{log.read_text()[-3000:]}")
    return log.read_text()


def _registered(name: str, agent_id: str = "") -> WorkerHost:
    def held() -> WorkerHost | None:
        host = WorkerHost.objects.filter(name=name).exclude(agent_id="").first()
        return host if host is not None and host.agent_id != agent_id and host.alive else None

    return wait_for(held, EXIT_BOUND_S, f"an agent to hold host {name}")


@pytest.mark.django_db(transaction=True)
def test_two_celery_agents_with_one_host_token_the_second_exits_naming_the_first(env, tmp_path):
    name, queue = env["HEADWAY_HOST_NAME"], env["HEADWAY_QUEUE"]
    first = start_worker(env, tmp_path / "first.log", queue, name)
    agents = [first]
    try:
        held = _registered(name)
        second_log = tmp_path / "second.log"
        second = start_worker(env, second_log, queue, name, token=first.host_token)
        agents.append(second)
        text = _exited_by_itself(second, second_log)
        assert second.returncode != 0, text
        assert f"host {name} is already served by another agent" in text, text
        assert f"pid {held.agent_pid}" in text and "this worker stops" in text, text
        assert first.poll() is None
        assert WorkerHost.objects.get(name=name).agent_id == held.agent_id
        # The first one crashes: an agent started again on the same machine (same
        # HEADWAY_VAR_DIR) finds it dead and takes over its instance id at once, without
        # waiting for the host timeout (workers/reattach.py).
        os.killpg(first.pid, 9)
        first.wait()
        third = start_worker(env, tmp_path / "third.log", queue, name, token=first.host_token)
        agents.append(third)

        def taken_over() -> WorkerHost | None:
            host = WorkerHost.objects.get(name=name)
            return host if host.agent_pid == third.pid and host.alive else None

        assert wait_for(taken_over, EXIT_BOUND_S, "the restarted agent").agent_id == held.agent_id
        assert third.poll() is None
    finally:
        stop_workers([agent for agent in agents if agent.poll() is None])


@pytest.mark.django_db(transaction=True)
def test_a_new_agent_elsewhere_takes_a_silent_host_after_the_host_timeout(env, tmp_path):
    """Without the dead agent's state file (another machine, or a lost var dir) the host is
    taken by a new instance once the old one was silent for the host timeout."""
    name, queue = env["HEADWAY_HOST_NAME"], env["HEADWAY_QUEUE"]
    first = start_worker(env, tmp_path / "first.log", queue, name)
    agents = [first]
    try:
        held = _registered(name)
        os.killpg(first.pid, 9)
        first.wait()
        # Set back here instead of waited for.
        silent = timezone.now() - timedelta(hours=1)
        WorkerHost.objects.filter(name=name).update(heartbeat_at=silent)
        elsewhere = dict(env, HEADWAY_VAR_DIR=str(tmp_path / "other-var"))
        second = start_worker(
            elsewhere, tmp_path / "second.log", queue, name, token=first.host_token
        )
        agents.append(second)
        assert _registered(name, agent_id=held.agent_id).agent_pid != held.agent_pid
        assert second.poll() is None
    finally:
        stop_workers([agent for agent in agents if agent.poll() is None])


@pytest.mark.django_db(transaction=True)
def test_a_celery_agent_whose_token_is_revoked_exits(env, tmp_path):
    from registry.lifecycle.host_tokens import host_token_revoke

    name = env["HEADWAY_HOST_NAME"]
    log = tmp_path / "agent.log"
    agent = start_worker(env, log, env["HEADWAY_QUEUE"], name)
    try:
        _registered(name)
        host_token_revoke(name)
        text = _exited_by_itself(agent, log)
    finally:
        stop_workers([agent] if agent.poll() is None else [])
    assert agent.returncode != 0, text
    assert "host token revoked" in text and "this worker exits once its trials stopped" in text
