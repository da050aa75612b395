"""``WorkerHost``: a machine whose Celery worker runs trials, with its slots and devices."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class WorkerHostQuerySet(models.QuerySet):
    """Lookups of hosts by liveness."""

    def alive(self, now: datetime | None = None) -> WorkerHostQuerySet:
        """Hosts that heartbeated within ``HEADWAY_HOST_TIMEOUT_SECONDS`` of ``now``."""
        return self.filter(heartbeat_at__gte=alive_cutoff(now))


def alive_cutoff(now: datetime | None = None) -> datetime:
    """The oldest heartbeat an alive host can have."""
    timeout = timedelta(seconds=settings.HEADWAY_HOST_TIMEOUT_SECONDS)
    return (now or timezone.now()) - timeout


class WorkerHost(models.Model):
    """One worker process's host, registered and heartbeated by the worker (``workers.hosts``).

    ``devices`` lists the host's slots by id, lowest first: GPU ids as CUDA names them
    (``["0", "1"]``, or what ``CUDA_VISIBLE_DEVICES`` listed) when ``gpu``, else ``["cpu0",
    "cpu1", ...]`` for configured CPU slots. A run placed here holds ``run.slots`` of them
    (``run.devices``) until it exits; what is free is computed from the runs, never counted.
    """

    name = models.CharField(max_length=200, unique=True)
    # The HEADWAY_QUEUE the worker runs with: the registry places runs only on hosts of its own
    # pool, so registries (or test sessions) sharing one broker never take each other's runs.
    pool = models.CharField(max_length=200, default="")
    # The host's own Celery queue (``<pool>.host.<name>``), where placed runs are sent.
    queue = models.CharField(max_length=255)
    slots = models.PositiveIntegerField(default=0)
    devices = models.JSONField(default=list)
    gpu = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    # None once the worker shut down: it holds no slots for placement from then on.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    objects = WorkerHostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"Host {self.name} ({self.slots} slots)"

    def is_alive(self, now: datetime | None = None) -> bool:
        """Whether the host heartbeated within ``HEADWAY_HOST_TIMEOUT_SECONDS`` of ``now``."""
        return self.heartbeat_at is not None and self.heartbeat_at >= alive_cutoff(now)

    @property
    def alive(self) -> bool:
        """``is_alive()`` now (for templates and serializers)."""
        return self.is_alive()
