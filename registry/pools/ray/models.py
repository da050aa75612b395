"""The ray pool type's tables: ``RayJob`` (the Ray job that runs one run) and ``RayPoolState``
(the Ray cluster of a pool as the last reconciliation saw it: its capacity in slots).

Imported by ``registry.models`` while Django loads the app (the pool types' models hook), with
``app_label = "registry"``, so their migrations are the registry app's.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone


class RayJobQuerySet(models.QuerySet):
    """Lookups of Ray jobs by what the reconciliation still has to do."""

    def unfinished(self) -> RayJobQuerySet:
        """Jobs whose hosts and tokens are not cleaned up yet."""
        return self.filter(cleaned=False)


class RayJob(models.Model):
    """One run's Ray job, as ``registry.pools.ray`` submitted it and last saw it.

    The master made a host per bundle of the run's placement group (``WorkerHost`` rows
    ``ray-r<run>-b<i>``, ``made_for_run`` this job's run) and a host token for each; the job's
    driver (``python -m workers.ray_node``) runs one Headway node per bundle. ``state`` is
    Ray's job status, or ``PLACING`` while the job runs and its placement group waits;
    ``reason`` Ray's own reason (the group's scheduling state, the job's message); ``nodes``
    the addresses of the Ray nodes its bundles were placed on, by bundle.
    """

    run = models.OneToOneField(
        "registry.TrialRun", on_delete=models.CASCADE, related_name="ray_job"
    )
    pool = models.CharField(max_length=200)
    submission_id = models.CharField(max_length=300, db_index=True)
    state = models.CharField(max_length=32, default="SUBMITTED")
    reason = models.CharField(max_length=500, blank=True, default="")
    nodes = models.CharField(max_length=500, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    cleaned = models.BooleanField(default=False)

    objects = RayJobQuerySet.as_manager()

    class Meta:
        app_label = "registry"
        ordering: ClassVar[list[str]] = ["-submitted_at"]

    def __str__(self) -> str:
        return f"Ray job {self.submission_id} ({self.state}) of run {self.run_id}"

    @property
    def hosts(self) -> models.QuerySet:
        """The hosts the master made for the job's run (one per bundle)."""
        from registry.models import WorkerHost

        return WorkerHost.objects.filter(made_for_run_id=self.run_id)


class RayPoolState(models.Model):
    """A ray pool's cluster as the last reconciliation found it (shown with the pool, read
    without calling Ray): alive nodes, the slots they hold (``resources_per_slot`` each), or
    why the cluster did not answer."""

    namespace = models.CharField(max_length=200, default="")
    pool = models.CharField(max_length=200)
    nodes = models.PositiveIntegerField(default=0)
    slots = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True, default="")
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "registry"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["namespace", "pool"], name="ray_pool_state_unique")
        ]

    def __str__(self) -> str:
        return f"Ray cluster of pool {self.pool}: {self.nodes} node(s), {self.slots} slot(s)"
