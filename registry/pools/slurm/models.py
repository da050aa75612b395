"""The slurm pool type's tables: ``SlurmJob`` (the batch job that runs one run) and
``SlurmNode`` (a node as Headway's own jobs found it, and whether they avoid it).

Imported by ``registry.models`` while Django loads the app (the pool types' models hook), with
``app_label = "registry"`` and the tables they always had (``registry_slurmjob``,
``registry_slurmnode``), so their migrations stay the registry app's.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone


class SlurmJobQuerySet(models.QuerySet):
    """Lookups of Slurm jobs by what the reconciliation still has to do."""

    def unfinished(self) -> SlurmJobQuerySet:
        """Jobs whose hosts and tokens are not cleaned up yet (pending, running, or ended
        while their run had not)."""
        return self.filter(cleaned=False)


class SlurmJob(models.Model):
    """One run's Slurm job, as ``registry.pools.slurm`` submitted it and last saw it.

    The master made a host per node of the job (``WorkerHost`` rows ``slurm-r<run>-n<i>``, each
    ``made_for_run`` this job's run: ``hosts``) and a host token for each; the job's node
    processes (``python -m workers.slurm_node``) run the run over REST as a host agent does.
    ``state`` and ``reason`` are Slurm's (``PENDING``/``Resources``...), copied at each
    reconciliation; ``cleaned`` once the job ended and its hosts were removed and tokens revoked.
    """

    run = models.OneToOneField(
        "registry.TrialRun", on_delete=models.CASCADE, related_name="slurm_job"
    )
    pool = models.CharField(max_length=200)
    job_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    state = models.CharField(max_length=32, default="SUBMITTED")
    reason = models.CharField(max_length=200, blank=True, default="")
    nodes = models.CharField(max_length=500, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    cleaned = models.BooleanField(default=False)

    objects = SlurmJobQuerySet.as_manager()

    class Meta:
        app_label = "registry"
        ordering: ClassVar[list[str]] = ["-submitted_at"]

    def __str__(self) -> str:
        return f"Slurm job {self.job_id} ({self.state}) of run {self.run_id}"

    @property
    def hosts(self) -> models.QuerySet:
        """The hosts the master made for the job's run (one per node)."""
        from registry.models import WorkerHost

        return WorkerHost.objects.filter(made_for_run_id=self.run_id)


class SlurmNode(models.Model):
    """One node of a slurm pool that Headway's jobs ran on and failed to start a run on.

    Headway is a Slurm user, not its admin: it never drains a node in Slurm. It counts, per
    node, runs whose job ended on it before their ranks started (``failed_starts``, in a row:
    a run that starts there resets it) and, at ``HEADWAY_HOST_MAX_FAILED_STARTS``, stops
    sending its own jobs there (``excluded_reason`` set: ``sbatch --exclude``) until an admin
    enables it again (``registry.pools.slurm._nodes``). A row exists only for a node that had a
    failed start; ``namespace`` is the registry's (``HEADWAY_QUEUE``), as on ``WorkerHost``.
    """

    namespace = models.CharField(max_length=200, default="")
    pool = models.CharField(max_length=200)
    # Slurm's node name (NodeName), as `scontrol show hostnames` expands a job's node list.
    name = models.CharField(max_length=200)
    failed_starts = models.PositiveIntegerField(default=0)
    # Non-empty while excluded: why (shown with the pool), set by the master alone.
    excluded_reason = models.CharField(max_length=500, blank=True, default="")
    excluded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "registry"
        ordering: ClassVar[list[str]] = ["pool", "name"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["namespace", "pool", "name"], name="slurm_node_unique_per_pool"
            )
        ]

    def __str__(self) -> str:
        state = "excluded" if self.excluded_reason else f"{self.failed_starts} failed start(s)"
        return f"Slurm node {self.name} of pool {self.pool} ({state})"
