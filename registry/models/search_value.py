"""``TrialSearchValue``: one searchable value of a trial (a hyperparameter or the latest value of
a metric series), the narrow side table the filter language (``registry.search``) queries.

Rows are written by PostgreSQL triggers on ``registry_trial`` (migration 0028), never by
Python: every writer of ``Trial.hparams`` / ``Trial.summary_metrics`` (the metric store's one
statement, bulk inserts, MLflow params, tests) keeps them current without knowing of them. On
another database (the embedded SQLite) the table stays empty and the filter reads the JSON
columns instead (``registry.search.compile``). docs/decisions/search.md says why.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models

HPARAM_PREFIX = "hp:"
"""``key`` of hyperparameter ``a.b`` (nested names dotted): ``hp:a.b``."""

METRIC_PREFIX = "m:"
"""``key`` of the series ``name`` of group ``group``: ``m:group:name``."""

MAX_KEY_LENGTH = 300
"""Longer keys are not stored (not searchable): a btree entry must stay under ~2.7 kB."""

MAX_TEXT_LENGTH = 300
"""String values are stored (and compared) on their first 300 characters, for the same reason."""


def hparam_key(path: str) -> str:
    """The ``key`` of the hyperparameter at dotted ``path``."""
    return HPARAM_PREFIX + path


def metric_key(group: str, name: str) -> str:
    """The ``key`` of the metric series ``name`` of ``group``."""
    return f"{METRIC_PREFIX}{group}:{name}"


class TrialSearchValue(models.Model):
    """``(trial, key) -> num | text``: a number (``num``; a metric's latest value, a numeric
    hyperparameter) or a string (``text``; a string hyperparameter, or ``"true"``/``"false"``
    for a boolean one). One of the two is set, or neither (a NaN metric value)."""

    pk = models.CompositePrimaryKey("trial", "key")
    # No index of its own: the primary key (trial, key) leads with it.
    trial = models.ForeignKey(
        "registry.Trial", on_delete=models.CASCADE, related_name="search_values", db_index=False
    )
    key = models.CharField(max_length=MAX_KEY_LENGTH)
    num = models.FloatField(null=True)
    text = models.CharField(max_length=MAX_TEXT_LENGTH, null=True)

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            # A range or equality on one key answers its trial ids from the index alone
            # (index-only scan): ``trial`` is the last column for that.
            models.Index(
                fields=["key", "num", "trial"],
                condition=models.Q(num__isnull=False),
                name="search_value_num",
            ),
            models.Index(
                fields=["key", "text", "trial"],
                condition=models.Q(text__isnull=False),
                name="search_value_text",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} of trial {self.trial_id}"
