"""The dashboard's own rows: saved views of a table (``dashboard.saved_views``)."""

from __future__ import annotations

from typing import ClassVar
from urllib.parse import urlencode

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

MAX_VIEW_NAME = 100


class SavedView(models.Model):
    """A named filter, sort and column choice of a table, shared with every user who sees the
    table: an experiment's trials table (``experiment`` set; read as the experiment is read,
    through ``registry.authz``) or the experiment list (``experiment`` null; every user).

    ``filter`` is the filter language (docs/search.md), ``sort`` the table's ``?sort=`` key,
    ``columns`` a list of column names (``dashboard.table_query``; empty for the experiment
    list). Only its owner or a site admin deletes it; saving again under the same name by the
    same owner replaces it.
    """

    name = models.CharField(max_length=MAX_VIEW_NAME)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views"
    )
    experiment = models.ForeignKey(
        "registry.Experiment",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="saved_views",
    )
    filter = models.TextField(blank=True, default="")
    sort = models.CharField(max_length=300, blank=True, default="")
    columns = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name", "id")
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # Two conditional constraints, not ``nulls_distinct``: the list's views have no
            # experiment, and NULLs never collide in a plain unique constraint.
            models.UniqueConstraint(
                fields=["owner", "experiment", "name"],
                condition=Q(experiment__isnull=False),
                name="dashboard_view_name_per_experiment",
            ),
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=Q(experiment__isnull=True),
                name="dashboard_view_name_on_list",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def params(self) -> str:
        """The table's query string (no ``?``) that applies this view."""
        values = {"filter": self.filter, "columns": ",".join(self.columns), "sort": self.sort}
        return urlencode({k: v for k, v in values.items() if v})
