"""``Experiment``: one submitted config + model definition, and the trials its searcher made."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from registry.models.states import TERMINAL_STATES, State


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

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"Experiment {self.id} ({self.name})"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def searcher_metric(self) -> str:
        return self.config.get("searcher", {}).get("metric", "")

    @property
    def smaller_is_better(self) -> bool:
        return bool(self.config.get("searcher", {}).get("smaller_is_better", True))

    def is_better(self, candidate: float, incumbent: float | None) -> bool:
        """True when ``candidate`` beats ``incumbent`` for this experiment's searcher metric."""
        if incumbent is None:
            return True
        return candidate < incumbent if self.smaller_is_better else candidate > incumbent
