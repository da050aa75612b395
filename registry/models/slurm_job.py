"""``SlurmJob``: the Slurm batch job that runs one run of a ``slurm`` pool."""

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
    """One run's Slurm job, as ``registry.slurm`` submitted it and last saw it.

    The master made a host per node of the job (``WorkerHost`` rows ``slurm-r<run>-n<i>``,
    ``hosts``) and a host token for each; the job's node processes (``python -m
    workers.slurm_node``) run the run over REST as a host agent does. ``state`` and ``reason``
    are Slurm's (``PENDING``/``Resources``...), copied at each reconciliation; ``cleaned`` once
    the job ended and its hosts were removed and tokens revoked.
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
        ordering: ClassVar[list[str]] = ["-submitted_at"]

    def __str__(self) -> str:
        return f"Slurm job {self.job_id} ({self.state}) of run {self.run_id}"
