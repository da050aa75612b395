"""The model registry: named models whose versions point at checkpoints (MLflow's registered
models, Determined's ``Model`` / ``ModelVersion``).

A checkpoint held by a version is protected (``on_delete=PROTECT``): retention never collects it and
deleting its experiment is refused with a 409 naming the model.
"""

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone


class RegisteredModel(models.Model):
    """A named model (``models/{name}/``); its versions are ``ModelVersion`` rows."""

    name = models.CharField(max_length=256, unique=True)
    description = models.TextField(blank=True, default="")
    labels = models.JSONField(default=list)
    metadata = models.JSONField(default=dict)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    archived = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["name"]

    def __str__(self) -> str:
        return f"Model {self.name}"


class ModelVersion(models.Model):
    """Version ``version`` (1, 2, ...) of a registered model: one checkpoint plus notes."""

    model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    checkpoint = models.ForeignKey(
        "registry.Checkpoint", on_delete=models.PROTECT, related_name="model_versions"
    )
    name = models.CharField(max_length=256, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    labels = models.JSONField(default=list)
    metadata = models.JSONField(default=dict)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["model", "-version"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["model", "version"], name="unique_model_version")
        ]

    def __str__(self) -> str:
        return f"{self.model.name} v{self.version}"
