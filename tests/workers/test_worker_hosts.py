"""A worker's host (``workers.hosts``): what it detects, registers, heartbeats and stops.

The heartbeat goes over REST with the host's token (``host_agent``: this process as a host of
a live server); what the master recorded is read from its database.
"""

from __future__ import annotations

import time
import types

import pytest
from celery.exceptions import WorkerShutdown

from headway.client import BadRequestError
from registry.models import WorkerHost
from workers import config, hosts, leases


@pytest.fixture
def no_gpu_env(monkeypatch):
    monkeypatch.setattr(config.settings, "HEADWAY_SLOTS", None)
    monkeypatch.setattr(config.settings, "HEADWAY_HOST_NAME", "node-1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.fixture
def no_leases(monkeypatch):
    """This process's held leases, empty for this test."""
    monkeypatch.setattr(leases, "_held", {})


def test_configured_cpu_slots_win(no_gpu_env, monkeypatch):
    monkeypatch.setattr(config.settings, "HEADWAY_SLOTS", 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert hosts.detect_host() == hosts.HostSpec("node-1", 3, ("cpu0", "cpu1", "cpu2"), False)


def test_cuda_visible_devices_lists_the_gpus(no_gpu_env, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert hosts.detect_host() == hosts.HostSpec("node-1", 2, ("2", "3"), True)


@pytest.mark.parametrize("listed", ["", "-1", "-1,0"])
def test_cuda_visible_devices_can_hide_every_gpu(no_gpu_env, monkeypatch, listed):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert hosts.detect_host() == hosts.HostSpec("node-1", 1, ("cpu0",), False)


def test_without_the_variable_torch_counts_the_gpus(no_gpu_env, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert hosts.detect_host() == hosts.HostSpec("node-1", 2, ("0", "1"), True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert hosts.detect_host() == hosts.HostSpec("node-1", 1, ("cpu0",), False)


def test_the_host_queue_is_in_the_namespace(monkeypatch):
    monkeypatch.setattr(config.settings, "HEADWAY_QUEUE", "pool-x")
    assert hosts.host_queue("gpu-a") == "pool-x.host.gpu-a"
    assert hosts.host_queue("gpu-a", "other") == "other.host.gpu-a"


def _beat(agent, slots: int = 2) -> hosts.HostHeartbeat:
    return hosts.HostHeartbeat(
        hosts.HostSpec(agent.name, slots, tuple(str(i) for i in range(slots)), True), 3600
    )


def test_a_heartbeat_registers_the_host_again_after_its_row_was_deleted(
    host_agent, settings, no_leases
):
    beat = _beat(host_agent)
    assert beat.renew()
    row = WorkerHost.objects.get()
    assert row.pool == config.settings.HEADWAY_RESOURCE_POOL  # the pool; the queue's prefix is
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE  # the namespace, the master's HEADWAY_QUEUE
    assert (row.name, row.namespace, row.queue, row.slots, row.devices, row.gpu, row.alive) == (
        host_agent.name,
        namespace,
        f"{namespace}.host.{host_agent.name}",
        2,
        ["0", "1"],
        True,
        True,
    )
    WorkerHost.objects.all().delete()
    assert beat.renew()
    assert WorkerHost.objects.get().started_at == row.started_at  # the worker's start time


def test_the_host_adopts_the_masters_timing(host_agent, settings, no_leases):
    settings.HEADWAY_HOST_HEARTBEAT_SECONDS = 1.5
    settings.HEADWAY_LEASE_SECONDS = 12.0
    settings.HEADWAY_KILL_GRACE_SECONDS = 4.0
    config.configure(
        HEADWAY_HOST_HEARTBEAT_SECONDS=10.0,
        HEADWAY_LEASE_SECONDS=30.0,
        HEADWAY_KILL_GRACE_SECONDS=9.0,
    )
    beat = _beat(host_agent)
    assert beat.renew()
    assert beat.interval == 1.5
    agent = config.settings
    assert (
        agent.HEADWAY_HOST_HEARTBEAT_SECONDS,
        agent.HEADWAY_LEASE_SECONDS,
        agent.HEADWAY_KILL_GRACE_SECONDS,
    ) == (1.5, 12.0, 4.0)


def test_a_heartbeat_renews_the_leases_the_host_holds(host_agent, no_leases, django_user_model):
    """The beat lists the runs this host holds: the master renews each one placed here (its
    ``heartbeat_at``), and the host counts the beat's start as the lease's renewal."""
    from registry.models import TrialRun
    from tests.helpers import reload, submit_single_trial

    host_agent.register(slots=1)
    trial = submit_single_trial(django_user_model.objects.create_user("leaseholder"))
    run_id = reload(trial).run_id
    assert TrialRun.objects.get(trial=trial, run_id=run_id).host.name == host_agent.name
    claimed = time.monotonic()
    assert host_agent.api.run_claim(trial.id, run_id, worker="test").claimed
    lease = leases.hold(leases.RUN, trial.id, run_id, node_rank=0, claimed=claimed)
    before = TrialRun.objects.get(trial=trial, run_id=run_id).heartbeat_at
    started = time.monotonic()
    assert _beat(host_agent, slots=1).renew()
    assert TrialRun.objects.get(trial=trial, run_id=run_id).heartbeat_at > before
    assert lease.renewed >= started and not lease.expired


def test_a_revoked_host_token_ends_every_lease_at_once(host_agent, no_leases):
    from registry.lifecycle.host_tokens import host_token_revoke

    beat = _beat(host_agent)
    assert beat.renew()
    lease = leases.hold(leases.RUN, trial_id=1, run_id=1, node_rank=0, claimed=time.monotonic())
    host_token_revoke(host_agent.name)
    assert not beat.renew()  # 401: refused, logged, not raised
    assert host_agent.name in beat.refused and "refused" in beat.refused
    assert lease.expired == beat.refused  # the watchdog stops its processes next


def test_stopping_marks_the_host_stopped_and_ends_the_thread(host_agent, no_leases):
    beat = _beat(host_agent, slots=1)
    beat.start()
    assert WorkerHost.objects.get(name=host_agent.name).alive
    assert beat._thread is not None and beat._thread.is_alive()
    beat.stop()
    assert not beat._thread.is_alive()
    host = WorkerHost.objects.get(name=host_agent.name)
    assert host.heartbeat_at is None and not host.alive


def test_an_unknown_pool_stops_the_worker_at_start(host_agent, monkeypatch, no_leases):
    """The master answers 400 to the first heartbeat of a host whose pool its file does not
    list: ``HostHeartbeat.start`` raises, and ``hosts.start`` (the worker's ready signal)
    turns it into ``WorkerShutdown`` naming the pool; no host is registered."""
    monkeypatch.setattr(hosts, "_current", None)
    config.configure(HEADWAY_RESOURCE_POOL="huge", HEADWAY_SLOTS=1)
    with pytest.raises(BadRequestError, match="unknown resource pool 'huge'"):
        _beat(host_agent).start()
    with pytest.raises(WorkerShutdown, match="pool: unknown resource pool 'huge'"):
        hosts.start()
    assert hosts._current is None
    assert not WorkerHost.objects.filter(name=host_agent.name).exists()


class FakeTaskConsumer:
    def __init__(self, queues: list[str]) -> None:
        self.queues = queues

    def consuming_from(self, queue: str) -> bool:
        return queue in self.queues


def test_the_worker_consumes_its_host_queue_even_when_its_command_line_lacks_it(caplog):
    added: list[str] = []
    consumer = types.SimpleNamespace(
        task_consumer=FakeTaskConsumer(["headway"]),
        add_task_queue=added.append,
        controller=types.SimpleNamespace(concurrency=1),
    )
    hosts._consume(consumer, "headway.host.gpu-a", slots=2)
    assert added == ["headway.host.gpu-a"]
    assert "concurrency 1 < slots + 1 (3)" in caplog.text
    consumer.task_consumer.queues.append("headway.host.gpu-a")
    hosts._consume(consumer, "headway.host.gpu-a", slots=2)
    assert added == ["headway.host.gpu-a"]
