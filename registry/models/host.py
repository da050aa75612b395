"""``WorkerHost``: a machine whose Celery worker runs trials, with its slots and devices."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from registry.models.states import RunState


class HostAdminState(models.TextChoices):
    """What the admin allows on a host (``headway host enable|disable``), as Determined's
    ``det agent enable|disable [--drain]``: ENABLED takes new runs; DRAINING takes none and
    lets its running ones finish; DISABLED takes none and preempts its running ones
    (``registry.lifecycle.host_ops``). Kept across heartbeats and restarts of its agent."""

    ENABLED = "enabled"
    DRAINING = "draining"
    DISABLED = "disabled"


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
    # The resource pool the host joined (HEADWAY_RESOURCE_POOL; registry.pools): only runs of
    # that pool are placed here.
    pool = models.CharField(max_length=200, default="default")
    # The HEADWAY_QUEUE (the cluster's queue prefix) of the process that registered the host: a
    # registry places runs only on hosts of its own namespace, so registries or test clusters
    # sharing one database or broker never take each other's runs.
    namespace = models.CharField(max_length=200, default="")
    # The host's own Celery queue (``<namespace>.host.<name>``), where placed runs are sent.
    queue = models.CharField(max_length=255)
    slots = models.PositiveIntegerField(default=0)
    devices = models.JSONField(default=list)
    gpu = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    # None once the worker shut down: it holds no slots for placement from then on.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Made by its pool for this one run (a pool whose hosts are per run, such as a batch job's
    # nodes: registry.pools.provider.HostOrigin.PER_RUN) and removed by the pool once the run's
    # work there ended; never placed on by the scheduler. None: a host agent registered it.
    made_for_run = models.ForeignKey(
        "registry.TrialRun",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="pool_hosts",
    )
    # The admin's switch (HostAdminState): placement uses only ENABLED hosts.
    admin_state = models.CharField(
        max_length=16, choices=HostAdminState.choices, default=HostAdminState.ENABLED
    )
    # Why it is not ENABLED when the master decided it (drained automatically: see
    # registry.lifecycle._host_health); empty after an admin's enable, disable or drain.
    admin_reason = models.CharField(max_length=500, blank=True, default="")
    # Runs lost on it in a row before their ranks started (reset by a run that starts).
    failed_starts = models.PositiveIntegerField(default=0)
    # The agent process that holds the host now (a uuid each agent process draws at start),
    # with its pid and address for the message that refuses a second agent of the same host
    # while this one heartbeats (registry.scheduling._hosts.host_heartbeat).
    agent_id = models.CharField(max_length=64, blank=True, default="")
    agent_pid = models.IntegerField(null=True, blank=True)
    agent_address = models.CharField(max_length=255, blank=True, default="")

    objects = WorkerHostQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["name"]

    def __str__(self) -> str:
        return f"Host {self.name} ({self.slots} slots)"

    def is_alive(self, now: datetime | None = None) -> bool:
        """Whether the host heartbeated within ``HEADWAY_HOST_TIMEOUT_SECONDS`` of ``now``."""
        return self.heartbeat_at is not None and self.heartbeat_at >= alive_cutoff(now)

    @property
    def alive(self) -> bool:
        """``is_alive()`` now (for templates and serializers)."""
        return self.is_alive()


class RunShare(models.Model):
    """The part of a run that spans several hosts which runs on one more host (node 1, 2...).

    A run placed over several hosts keeps its chief part (node 0, global rank 0) on the run
    itself (``TrialRun.host``/``slots``/``devices``); every other host's part is a share, started
    by that host's worker (``headway.run_trial_share``) with torchrun's static rendezvous on the
    chief host (``rendezvous``, ``"address:port"``, written by the chief's worker once it claimed
    the run). A share holds its host's slots while its run is not EXITED or its own processes
    still run (``state`` not EXITED).
    """

    run = models.ForeignKey("registry.TrialRun", on_delete=models.CASCADE, related_name="shares")
    node_rank = models.PositiveIntegerField()
    host = models.ForeignKey(
        WorkerHost, null=True, blank=True, on_delete=models.SET_NULL, related_name="shares"
    )
    slots = models.PositiveIntegerField(default=0)
    devices = models.JSONField(default=list, blank=True)
    # QUEUED until the host's worker claims it, then STARTING / RUNNING, EXITED at the end.
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    worker = models.CharField(max_length=255, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    rendezvous = models.CharField(max_length=300, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # As TrialRun.log_position, for this share's output lines.
    log_position = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering: ClassVar[list[str]] = ["run_id", "node_rank"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["run", "node_rank"], name="unique_share_per_node"),
        ]

    def __str__(self) -> str:
        return f"Share {self.node_rank} of run {self.run_id} ({self.state})"


def shares_holding_slots(now: datetime | None = None) -> models.Q:
    """``RunShare`` filter: shares that hold their host's slots now.

    While their run is not EXITED; after that while their own processes still run, i.e. the
    share is STARTING/RUNNING and its lease is not lost yet (renewed within
    ``HEADWAY_LEASE_SECONDS`` plus ``HEADWAY_LEASE_MARGIN_SECONDS``: until then its ranks may
    still run; a worker that died mid-run does not hold them forever).
    """
    timeout = timedelta(
        seconds=settings.HEADWAY_LEASE_SECONDS + settings.HEADWAY_LEASE_MARGIN_SECONDS
    )
    fresh = (now or timezone.now()) - timeout
    running = models.Q(state__in=[RunState.STARTING, RunState.RUNNING], heartbeat_at__gte=fresh)
    return ~models.Q(run__state=RunState.EXITED) | running
