"""This worker's host: what it offers (slots, devices), its registration and its heartbeat.

Steps, from Celery's ``worker_ready`` (``workers.tasks``):
1. Detect the host: ``HEADWAY_HOST_NAME``; ``HEADWAY_SLOTS`` CPU slots when set, else the GPUs
   (``CUDA_VISIBLE_DEVICES`` when set, else ``torch.cuda.device_count()``), else one CPU slot.
2. Make sure the worker consumes the host's queue ``<HEADWAY_QUEUE>.host.<name>`` (normally
   already on its ``-Q``; see ``workers.services.worker_command``).
3. Register the host (an upsert), send again the runs already placed on it, place queued runs.
4. A daemon thread renews, every ``HEADWAY_HOST_HEARTBEAT_SECONDS`` (at a fixed rate), the
   leases of the runs this worker holds and the host row (an upsert that recreates a deleted
   row), and asks a second thread for a placement pass, so a slow pass never delays a renewal.
   A third thread, the lease watchdog (``workers.leases``), stops the trials whose lease could
   not be renewed in time.
On warm shutdown ``stop()`` ends the thread and marks the host stopped before the running
trials are preempted, so none of them is placed back on this host.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from registry import scheduling
from workers import leases

logger = logging.getLogger("headway.worker")


@dataclass(frozen=True)
class HostSpec:
    """What a host offers: ``slots`` devices named by ``devices`` (lowest first).

    ``gpu``: the devices are CUDA device ids (``"0"``, ``"1"`` or what ``CUDA_VISIBLE_DEVICES``
    lists); otherwise they are CPU slot names ``"cpu0"``, ``"cpu1"``...
    """

    name: str
    slots: int
    devices: tuple[str, ...]
    gpu: bool


def host_queue(name: str, pool: str | None = None) -> str:
    """The Celery queue of host ``name`` in ``pool`` (default: this process's HEADWAY_QUEUE)."""
    return f"{pool or settings.CELERY_TASK_DEFAULT_QUEUE}.host.{name}"


def visible_gpus() -> list[str]:
    """CUDA device ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set (``""``: none),
    else ``"0"`` .. ``"N-1"`` for ``torch.cuda.device_count()`` (torch imported only here)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        ids = []
        for item in (part.strip() for part in listed.split(",")):
            if not item or item.startswith("-"):
                break  # CUDA ignores everything from the first invalid entry on ("-1": none)
            ids.append(item)
        return ids
    try:
        import torch
    except ImportError:
        return []
    return [str(index) for index in range(torch.cuda.device_count())]


def detect_host() -> HostSpec:
    """This host's spec from the settings and the devices visible to this process."""
    name = settings.HEADWAY_HOST_NAME
    if settings.HEADWAY_SLOTS is not None:
        count = settings.HEADWAY_SLOTS
        return HostSpec(name, count, tuple(f"cpu{i}" for i in range(count)), gpu=False)
    gpus = visible_gpus()
    if gpus:
        return HostSpec(name, len(gpus), tuple(gpus), gpu=True)
    return HostSpec(name, 1, ("cpu0",), gpu=False)


class HostHeartbeat:
    """Registers ``spec`` and keeps it alive from a daemon thread (sleeps between beats).

    Arguments:
        spec (HostSpec): the host to register.
        interval (float): seconds between heartbeats (``HEADWAY_HOST_HEARTBEAT_SECONDS``).
    """

    def __init__(self, spec: HostSpec, interval: float) -> None:
        self.spec = spec
        self.interval = interval
        self.queue = host_queue(spec.name)
        self.started_at: datetime = timezone.now()
        self._stop = threading.Event()
        self._place_due = threading.Event()
        self._redispatched = False  # done once, after the first successful registration
        self._thread: threading.Thread | None = None  # renewals
        self._placer: threading.Thread | None = None  # placement passes
        self.watchdog = leases.Watchdog()

    def register(self) -> None:
        """Upsert the host row (also every heartbeat)."""
        scheduling.host_heartbeat(
            name=self.spec.name,
            pool=settings.HEADWAY_RESOURCE_POOL,
            queue=self.queue,
            slots=self.spec.slots,
            devices=self.spec.devices,
            gpu=self.spec.gpu,
            started_at=self.started_at,
        )

    def start(self) -> None:
        """Beat once now (register, re-send runs already placed here, place), then renew every
        ``interval`` seconds from a daemon thread, with placement passes in another one and the
        lease watchdog in a third."""
        self.beat()
        self.watchdog.start()
        self._thread = threading.Thread(target=self._run, name="headway-host", daemon=True)
        self._placer = threading.Thread(target=self._place_loop, name="headway-place", daemon=True)
        self._thread.start()
        self._placer.start()

    def renew(self) -> bool:
        """Renew this worker's leases, then the host row; False (logged) when the database
        could not be reached."""
        # This thread keeps its own connection: drop it when it went bad or too old (never
        # inside a transaction, e.g. a test's).
        if not connection.in_atomic_block:
            close_old_connections()
        try:
            leases.renew()
            self.register()
        except Exception:
            logger.exception("host %s: heartbeat failed; retrying", self.spec.name)
            return False
        return True

    def place(self) -> None:
        """Re-send the runs placed here once (after the first renewal), then a placement pass
        (errors are logged, not raised)."""
        if not connection.in_atomic_block:
            close_old_connections()
        try:
            if not self._redispatched:
                resent = scheduling.host_redispatch(name=self.spec.name)
                self._redispatched = True
                if resent:
                    logger.info("host %s: sent %s placed run(s) again", self.spec.name, resent)
            scheduling.place_queued_runs(wait=False)  # never waits for a running pass
        except Exception:
            logger.exception("host %s: placement pass failed; retrying", self.spec.name)

    def beat(self) -> None:
        """One heartbeat: the renewal, then (when it succeeded) a placement pass in this
        thread."""
        if self.renew():
            self.place()

    def _run(self) -> None:
        # A fixed rate: the next renewal is due one interval after the previous one started.
        due = time.monotonic()
        while True:
            due += self.interval
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            due = max(due, time.monotonic())  # after a stall: one renewal now, then on the beat
            if self.renew():
                self._place_due.set()

    def _place_loop(self) -> None:
        while True:
            self._place_due.wait()
            if self._stop.is_set():
                return
            self._place_due.clear()
            self.place()

    def stop(self, timeout: float = 10.0) -> None:
        """End the threads, then mark the host stopped (no more runs are placed here)."""
        self._stop.set()
        self._place_due.set()
        for thread in (self._thread, self._placer):
            if thread is not None:
                thread.join(timeout)
        self.watchdog.stop()
        scheduling.host_stopped(name=self.spec.name)


_current: HostHeartbeat | None = None


def check_pool() -> None:
    """Stop this worker at start when its ``HEADWAY_RESOURCE_POOL`` is not one of the admin's
    pools (its host would never get a run).

    Raises:
        WorkerShutdown: Celery's SystemExit for stopping a worker (a signal handler's Exception
            would only be logged), with the message of ``registry.pools.check_worker_pool``.
    """
    from celery.exceptions import WorkerShutdown
    from django.core.exceptions import ImproperlyConfigured

    from registry.pools import check_worker_pool

    try:
        check_worker_pool(settings.HEADWAY_RESOURCE_POOL)
    except ImproperlyConfigured as exc:
        logger.critical("%s: this worker stops", exc)
        raise WorkerShutdown(str(exc)) from None


def start(consumer: Any = None) -> HostHeartbeat:
    """Detect, register and heartbeat this worker's host; ``consumer`` is Celery's (to make sure
    it consumes the host queue). Called once per worker process, from ``worker_ready``."""
    global _current
    if _current is not None:
        return _current  # once per process: a second ready signal changes nothing
    check_pool()
    spec = detect_host()
    heartbeat = HostHeartbeat(spec, settings.HEADWAY_HOST_HEARTBEAT_SECONDS)
    if consumer is not None:
        _consume(consumer, heartbeat.queue, spec.slots)
    heartbeat.start()
    _current = heartbeat
    logger.info(
        "host %s: %s slot(s) %s (%s), queue %s, heartbeat every %g s",
        spec.name,
        spec.slots,
        ",".join(spec.devices) or "-",
        "GPU" if spec.gpu else "CPU",
        heartbeat.queue,
        heartbeat.interval,
    )
    return heartbeat


def _consume(consumer: Any, queue: str, slots: int) -> None:
    # The worker's -Q normally names the host queue already; a worker started by hand (or
    # under another host name) still gets the queue its host is registered with.
    if not consumer.task_consumer.consuming_from(queue):
        logger.warning("the worker's -Q lacks its host queue %s; consuming it now", queue)
        consumer.add_task_queue(queue)
    concurrency = getattr(getattr(consumer, "controller", None), "concurrency", None)
    if isinstance(concurrency, int) and concurrency < slots + 1:
        logger.warning(
            "worker concurrency %s < slots + 1 (%s): runs placed here may wait for a thread",
            concurrency,
            slots + 1,
        )


def stop() -> None:
    """Warm shutdown: stop heartbeating and mark this worker's host stopped (if registered)."""
    global _current
    if _current is not None:
        try:
            _current.stop()
        except Exception:
            logger.exception("could not mark host %s stopped", _current.spec.name)
        _current = None
