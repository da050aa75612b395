"""The model registry: named models whose versions point at checkpoints (MLflow's registered
models, Determined's ``Model`` / ``ModelVersion``).

A checkpoint held by a version is protected (``on_delete=PROTECT``): retention never collects it and
deleting its experiment is refused with a 409 naming the model.
"""

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from registry.models.workspace import Workspace, default_workspace_id


class RegisteredModel(models.Model):
    """A named model (``models/{name}/``) in a workspace, whose roles decide who reads and
    changes it (``registry.authz``); its versions are ``ModelVersion`` rows. Names are unique
    across the installation (as MLflow's), not per workspace."""

    name = models.CharField(max_length=256, unique=True)
    workspace = models.ForeignKey(
        Workspace, on_delete=models.PROTECT, related_name="models", default=default_workspace_id
    )
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


class ModelAlias(models.Model):
    """A named pointer (``champion``, ``staging``) at one version of a model, as MLflow's
    ``@alias``; ``models/{name}@{alias}/`` resolves it. One alias name per model; moving it is
    one UPDATE of ``version``. Deleting the version deletes the alias (``CASCADE``; the service
    records it in ``ModelAliasEvent`` first)."""

    model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="aliases")
    alias = models.CharField(max_length=64)
    version = models.ForeignKey(ModelVersion, on_delete=models.CASCADE, related_name="aliases")
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["model", "alias"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["model", "alias"], name="unique_model_alias")
        ]

    def __str__(self) -> str:
        return f"{self.model.name}@{self.alias}"


class AliasAction(models.TextChoices):
    """What an alias event did: set a new alias, move one, delete it, or drop it with its
    version."""

    SET = "SET"
    MOVE = "MOVE"
    DELETE = "DELETE"
    VERSION_DELETED = "VERSION_DELETED"


class ModelAliasEvent(models.Model):
    """One change of a model's alias: ``from_version`` -> ``to_version`` (version numbers, not
    keys, so the history still reads after the versions are gone; None: no version)."""

    model = models.ForeignKey(
        RegisteredModel, on_delete=models.CASCADE, related_name="alias_events"
    )
    alias = models.CharField(max_length=64)
    action = models.CharField(max_length=16, choices=AliasAction.choices)
    from_version = models.PositiveIntegerField(null=True)
    to_version = models.PositiveIntegerField(null=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["model", "-id"]
        # The history route reads one model's events newest first.
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["model", "-id"], name="model_alias_event_model_id")
        ]

    def __str__(self) -> str:
        return f"{self.model_id}@{self.alias} {self.action}"
