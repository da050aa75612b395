"""``HparamImportanceFit``: one hyperparameter-importance fit of an experiment's metric.

A fit is keyed by the experiment and a hash of the metric and the trials' ``(id, value)`` pairs
(``registry.hparam_importance``), so every viewer of the same trial set shares one fit, and a
new or changed value is a new one. The row is also the fit's place in the cluster-wide queue:
while it is queued or running it holds one of ``HEADWAY_HPARAM_IMPORTANCE_MAX_FITS`` slots
(unique), which is how the web tier refuses more fits than the master's worker may run at once.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone


class FitState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    # The fit did not finish within its time limit, or raised: ``error`` says why.
    FAILED = "failed"


class HparamImportanceFit(models.Model):
    experiment = models.ForeignKey(
        "registry.Experiment", on_delete=models.CASCADE, related_name="+"
    )
    # Text, not a bounded CharField: the metric is part of the key's hash, not of an index.
    metric = models.TextField()
    # sha256 (hex) of the metric and the trials' (id, value) pairs the fit was asked for.
    key = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=FitState.choices, default=FitState.QUEUED)
    # 0 .. max fits - 1 while queued or running; NULL once done or failed (NULLs never collide).
    slot = models.PositiveSmallIntegerField(null=True, blank=True, unique=True)
    queued_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The answer of GET .../hparam-importance/ once done (registry.hparam_importance).
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # One fit per trial set: concurrent requests for it share the row.
            models.UniqueConstraint(fields=["experiment", "key"], name="unique_hparam_importance"),
        ]

    def __str__(self) -> str:
        return f"importance of {self.metric} in experiment {self.experiment_id}: {self.state}"
