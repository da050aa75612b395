"""``Experiment``: one submitted config + model definition, and the trials its searcher made.

The stored ``config`` is read through ``Experiment.conf`` (the validated
``headway.expconf.ExperimentConfig``), never with ``.get()`` chains that repeat the schema's
defaults; querysets that do not need the large columns use ``Experiment.objects.without_blobs()``
(or ``blob_fields("trial__experiment__")`` through a relation).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any, ClassVar, Self

from django.conf import settings
from django.db import models
from django.utils import timezone

from headway.expconf import ConfigError, ExperimentConfig, parse_experiment_config
from registry.errors import StoredConfigInvalid
from registry.models.states import DELETED_STATES, TERMINAL_STATES, State
from registry.models.workspace import Project, default_project_id

# The columns a list, a page or a scheduler pass rarely reads and that may be large: the
# packed model definition (up to megabytes), the submitted YAML and the searcher's state.
BLOB_FIELDS = ("model_definition", "original_config", "searcher_state")


def blob_fields(prefix: str = "", *, keep: Iterable[str] = ()) -> list[str]:
    """The lookups of ``BLOB_FIELDS`` (less ``keep``) behind ``prefix``, for ``defer()`` on a
    queryset of a related model, e.g. ``Trial.objects.defer(*blob_fields("experiment__"))``."""
    kept = set(keep)
    return [prefix + name for name in BLOB_FIELDS if name not in kept]


class ExperimentQuerySet(models.QuerySet["Experiment"]):
    """``Experiment.objects``: adds ``without_blobs()`` and ``not_deleted()``."""

    def not_deleted(self) -> Self:
        """Leave out experiments being deleted or deleted (``DELETED_STATES``); DELETE_FAILED
        ones stay. Composes with ``registry.authz.scoped`` in either order."""
        return self.exclude(state__in=DELETED_STATES)

    def without_blobs(self, *, keep: Iterable[str] = ()) -> Self:
        """Defer ``BLOB_FIELDS`` except those in ``keep`` (reading one later loads it)."""
        return self.defer(*blob_fields(keep=keep))


class Experiment(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    name = models.CharField(max_length=256)
    description = models.TextField(blank=True, default="")
    labels = models.JSONField(default=list)
    # Markdown, edited by the owner (dashboard notes box, PATCH); rendered sanitised.
    notes = models.TextField(blank=True, default="")
    # Validated config with defaults filled in (headway.expconf.ExperimentConfig.to_dict()).
    config = models.JSONField()
    original_config = models.TextField(blank=True, default="")
    # The uploaded model definition, a size-limited tar.gz checked by headway.archive.
    model_definition = models.BinaryField()
    model_definition_size = models.PositiveBigIntegerField(default=0)
    state = models.CharField(max_length=32, choices=State.choices, default=State.ACTIVE)
    archived = models.BooleanField(default=False)
    progress = models.FloatField(default=0.0)
    searcher_state = models.JSONField(default=dict)
    best_validation = models.FloatField(null=True, blank=True)
    # Set for experiments made by "continue trial".
    source_trial = models.ForeignKey(
        "registry.Trial", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Why ``DELETE experiments/{id}/`` failed (state DELETE_FAILED); "" otherwise.
    delete_error = models.TextField(blank=True, default="")
    # Unmanaged (``headway.experimental.core_v2``): made by a script run outside the cluster,
    # no model definition, never scheduled; ``external_id`` (unique per owner, "" = none) is
    # the script's ``external_experiment_id`` that finds it again (registry.lifecycle._unmanaged).
    unmanaged = models.BooleanField(default=False)
    external_id = models.CharField(max_length=256, blank=True, default="")
    # Where it lives (registry.workspaces): set from the config's ``workspace`` / ``project`` at
    # creation, changed by ``experiment_move``. The default (a row made by the ORM without
    # one) is the default project, ``Uncategorized``.
    project = models.ForeignKey(
        Project, on_delete=models.PROTECT, related_name="experiments", default=default_project_id
    )

    objects = ExperimentQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["-id"]
        indexes: ClassVar[list[models.Index]] = [models.Index(fields=["state"])]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["owner", "external_id"],
                condition=~models.Q(external_id=""),
                name="unique_external_experiment_per_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"Experiment {self.id} ({self.name})"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def is_deleted(self) -> bool:
        """Being deleted or deleted (``DELETED_STATES``): the row ``not_deleted()`` leaves out."""
        return self.state in DELETED_STATES

    @cached_property
    def conf(self) -> ExperimentConfig:
        """The stored ``config`` validated (``headway.expconf.ExperimentConfig``), parsed once
        per instance (reload the instance after writing ``config``).

        Raises:
            StoredConfigInvalid: the stored config no longer validates; it names the
                experiment and each bad field.
        """
        try:
            return parse_experiment_config(self.config)
        except ConfigError as exc:
            raise StoredConfigInvalid(self.id, exc.errors) from None

    def stored_checkpoint_storage(self) -> dict[str, Any]:
        """The ``checkpoint_storage`` mapping exactly as stored (``{}`` when none).

        Read raw, not through ``conf``, on purpose: which retention fields it holds tells an
        experiment stored before checkpoint retention existed (its checkpoints are all kept,
        ``RetentionPolicy.from_storage_config``), which ``conf``'s filled-in defaults would hide.
        """
        storage = self.config.get("checkpoint_storage") if isinstance(self.config, dict) else None
        return dict(storage) if isinstance(storage, dict) else {}

    @property
    def searcher_metric(self) -> str:
        """The searcher's ``metric`` (raises ``StoredConfigInvalid`` as ``conf``)."""
        return self.conf.searcher.metric

    @property
    def smaller_is_better(self) -> bool:
        """The searcher's ``smaller_is_better`` (raises ``StoredConfigInvalid`` as ``conf``)."""
        return self.conf.searcher.smaller_is_better

    def is_better(self, candidate: float, incumbent: float | None) -> bool:
        """True when ``candidate`` beats ``incumbent`` for this experiment's searcher metric."""
        if incumbent is None:
            return True
        return candidate < incumbent if self.smaller_is_better else candidate > incumbent

    def offer_best_validation(self, candidate: float) -> bool:
        """Store ``candidate`` as the experiment's ``best_validation`` if it beats the stored one;
        return whether it did.

        One conditional UPDATE, so trials reporting at the same moment never overwrite a better
        value with a worse one read from a stale row (a read-compare-write lost that race).
        """
        worse = "best_validation__gt" if self.smaller_is_better else "best_validation__lt"
        beaten = models.Q(best_validation__isnull=True) | models.Q(**{worse: candidate})
        updated = type(self).objects.filter(beaten, id=self.id).update(best_validation=candidate)
        return bool(updated)
