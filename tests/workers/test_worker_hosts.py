"""A worker's host (``workers.hosts``): what it detects, registers, heartbeats and stops."""

from __future__ import annotations

import types

import pytest

from registry.models import WorkerHost
from workers import hosts


@pytest.fixture
def no_gpu_env(monkeypatch, settings):
    settings.HEADWAY_SLOTS = None
    settings.HEADWAY_HOST_NAME = "node-1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_configured_cpu_slots_win(no_gpu_env, settings, monkeypatch):
    settings.HEADWAY_SLOTS = 3
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


def test_the_host_queue_is_in_the_worker_pool(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "pool-x"
    assert hosts.host_queue("gpu-a") == "pool-x.host.gpu-a"
    assert hosts.host_queue("gpu-a", "other") == "other.host.gpu-a"


@pytest.mark.django_db
def test_a_heartbeat_registers_the_host_again_after_its_row_was_deleted(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "pool-x"
    beat = hosts.HostHeartbeat(hosts.HostSpec("gpu-a", 2, ("0", "1"), True), interval=3600)
    beat.beat()
    row = WorkerHost.objects.get()
    assert row.pool == settings.HEADWAY_RESOURCE_POOL  # the resource pool; "pool-x" the namespace
    assert (row.name, row.namespace, row.queue, row.slots, row.devices, row.gpu, row.alive) == (
        "gpu-a",
        "pool-x",
        "pool-x.host.gpu-a",
        2,
        ["0", "1"],
        True,
        True,
    )
    WorkerHost.objects.all().delete()
    beat.beat()
    assert WorkerHost.objects.get().started_at == row.started_at  # the worker's start time


@pytest.mark.django_db
def test_stopping_marks_the_host_stopped_and_ends_the_thread():
    # The first beat runs in this thread; the long interval keeps the thread from writing
    # outside the test's transaction.
    beat = hosts.HostHeartbeat(hosts.HostSpec("gpu-a", 1, ("0",), True), interval=3600)
    beat.start()
    assert WorkerHost.objects.get().alive
    assert beat._thread is not None and beat._thread.is_alive()
    beat.stop()
    assert not beat._thread.is_alive()
    host = WorkerHost.objects.get()
    assert host.heartbeat_at is None and not host.alive


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
