"""The experiment list's filters and sort order (django-filter), read from the query string.

``?state=ACTIVE&label=baseline&owner=alice&name=mnist&archived=on&sort=-best`` filters by
state, by one label (exact), by owner (username), by a part of the name (case-insensitive),
by the filter language (``?filter=validation_accuracy > 0.9``, docs/search.md, through the REST
API's ``registry.search.filter_queryset``),
shows archived experiments too (hidden otherwise, like ``headway experiment list`` without
``--all``), and sorts by one of ``SORT_FIELDS`` (``-`` for descending). Every filter runs in the
database on ``dashboard.selectors.experiment_list()``, so paging stays one query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import django_filters
from django import forms
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    F,
    FloatField,
    IntegerField,
    OrderBy,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Lower
from django.http import QueryDict

from dashboard.table_query import apply_filter
from registry.authz import scoped
from registry.models import Experiment, Project, State, Workspace
from registry.search import Target

# Sort key in the URL -> (what it orders by, column title). Order is column order on the page;
# ``dashboard.selectors.experiment_list`` provides the annotations. Text sorts ignore case, the
# same on PostgreSQL and SQLite (whose default collation puts "Z" before "a").
SORT_FIELDS: dict[str, tuple[str | Lower, str]] = {
    "id": ("id", "ID"),
    "name": (Lower("name"), "Name"),
    "labels": (Lower("first_label"), "Labels"),
    "state": ("state", "State"),
    "progress": ("progress", "Progress"),
    "searcher": ("searcher_name", "Searcher"),
    "trials": ("num_trials", "Trials"),
    "best": ("best_validation", "Best value"),  # see best_order(): one metric at a time
    "started": ("created_at", "Started"),
    "duration": ("duration", "Duration"),
    "owner": (Lower("owner__username"), "Owner"),
}


def best_order(descending: bool) -> list[OrderBy]:
    """The order of the "best" sort: grouped by searcher metric (``metric_name``), best value
    first within each (``smaller_is_better`` honoured, read from the config by the database);
    ``descending`` puts the worst first. Experiments without a metric or a value come last.

    Comparing ``best_validation`` across experiments would rank a loss of 0.2 against an
    accuracy of 0.9; so values are only compared within one metric, and larger-is-better values
    are negated so that "ascending" means "best first" for every metric.
    """
    goodness = Case(
        When(config__searcher__smaller_is_better=False, then=-F("best_validation")),
        default=F("best_validation"),
        output_field=FloatField(),
    )
    missing = Case(
        When(best_validation__isnull=True, then=Value(1)),
        default=Value(0),
        output_field=IntegerField(),
    )
    metric = F("metric_name").asc(nulls_last=True)
    value = goodness.desc(nulls_last=True) if descending else goodness.asc(nulls_last=True)
    return [missing.asc(), metric, value]


class _SortFilter(django_filters.OrderingFilter):
    """``OrderingFilter`` with empty values last in both directions and ``-id`` as tie-break.

    Without the tie-break, rows with equal keys could move between pages; without
    ``nulls_last``, PostgreSQL and SQLite would place experiments with no best value differently.
    """

    def filter(self, qs: QuerySet[Experiment], value: list[str] | None) -> QuerySet[Experiment]:
        if not value:
            return qs
        keys: list[OrderBy] = []
        for param in value:
            descending = param.startswith("-")
            if param.lstrip("-") == "best":
                keys.extend(best_order(descending))
                continue
            field = SORT_FIELDS[param.lstrip("-")][0]
            expr = F(field) if isinstance(field, str) else field
            keys.append(expr.desc(nulls_last=True) if descending else expr.asc(nulls_last=True))
        if not any(param.lstrip("-") == "id" for param in value):
            keys.append(F("id").desc())
        return qs.order_by(*keys)


def _with_label(qs: QuerySet[Experiment], label: str) -> QuerySet[Experiment]:
    # JSON ``contains`` (PostgreSQL's ``@>``, served by a GIN index if one is added); SQLite lacks
    # it, so there the list's elements are compared one by one with ``json_each``. Both exact.
    if connection.features.supports_json_field_contains:
        return qs.filter(labels__contains=[label])
    table = Experiment._meta.db_table
    has_label = RawSQL(
        f'EXISTS (SELECT 1 FROM json_each("{table}"."labels") WHERE json_each.value = %s)',
        (label,),
        output_field=BooleanField(),
    )
    return qs.alias(has_label=has_label).filter(has_label=True)


class ExperimentFilter(django_filters.FilterSet):
    """Filters for the experiment list; ``.qs`` is the filtered, sorted queryset.

    Fields: ``filter`` (the filter language; a malformed one is ignored and its parser's
    message is in ``.errors``), ``name`` (substring, case-insensitive), ``state`` (one ``State``), ``label`` (one
    label, exact), ``owner`` (a username from a select of all users), ``archived`` (checkbox:
    include archived experiments), ``project`` / ``workspace`` (ids), ``sort`` (a
    ``SORT_FIELDS`` key, optionally ``-``-prefixed).
    Bind it to the query string even when empty (``data=request.GET``): an unbound filterset
    skips ``filter_queryset`` and would list archived experiments. An invalid value (an unknown
    state, user or sort key) is ignored while the other filters still apply; ``.errors`` says
    which.
    """

    filter = django_filters.CharFilter(
        method="filter_language",
        label="Filter",
        widget=forms.TextInput(
            attrs={
                "type": "search",
                "size": 48,
                "placeholder": "validation_accuracy > 0.95 and hparams.lr < 1e-3",
                "aria-describedby": "filter-help",
            }
        ),
    )
    name = django_filters.CharFilter(lookup_expr="icontains", label="Name contains")
    state = django_filters.ChoiceFilter(choices=State.choices, label="State", empty_label="any")
    label = django_filters.CharFilter(method="filter_label", label="Label")
    owner = django_filters.ModelChoiceFilter(
        field_name="owner",
        to_field_name="username",
        queryset=get_user_model().objects.order_by("username").only("id", "username"),
        label="Owner",
        empty_label="anyone",
    )
    archived = django_filters.BooleanFilter(
        method="filter_archived", widget=forms.CheckboxInput, label="Show archived"
    )
    # Where they live (ids, kept in hidden fields): a project's page fixes ``project``.
    project = django_filters.ModelChoiceFilter(
        field_name="project",
        # Only where the user has a role: another id is invalid (named nowhere on the page).
        queryset=lambda request: scoped(Project.objects.select_related("workspace"), request.user),
        widget=forms.HiddenInput,
        label="Project",
    )
    workspace = django_filters.ModelChoiceFilter(
        field_name="project__workspace",
        queryset=lambda request: scoped(Workspace.objects.all(), request.user),
        widget=forms.HiddenInput,
        label="Workspace",
    )
    sort = _SortFilter(
        fields={key: key for key in SORT_FIELDS},
        field_labels={key: title for key, (_, title) in SORT_FIELDS.items()},
        label="Sort by",
    )

    # The filter box's parser message, when ``filter_language`` ignored it.
    _language_error: str | None = None

    class Meta:
        model = Experiment
        fields: ClassVar[list[str]] = []

    def filter_label(self, qs: QuerySet[Experiment], name: str, value: str) -> QuerySet[Experiment]:
        """Experiments whose ``labels`` list holds ``value``."""
        return _with_label(qs, value.strip())

    def filter_language(
        self, qs: QuerySet[Experiment], name: str, value: str
    ) -> QuerySet[Experiment]:
        """Experiments matching the filter ``value``; unchanged (the message kept for
        ``filter_queryset`` to report) when it is malformed."""
        qs, self._language_error = apply_filter(qs, value, Target.EXPERIMENT)
        return qs

    def filter_archived(
        self, qs: QuerySet[Experiment], name: str, value: bool | None
    ) -> QuerySet[Experiment]:
        """Nothing to do here: ``filter_queryset`` hides archived rows unless this is ticked."""
        return qs

    def filter_queryset(self, queryset: QuerySet[Experiment]) -> QuerySet[Experiment]:
        """The declared filters, then archived rows dropped unless ``archived`` is ticked."""
        self._language_error = None
        queryset = super().filter_queryset(queryset)
        if self._language_error:
            self.form.add_error("filter", self._language_error)
        if not self.form.cleaned_data.get("archived"):
            queryset = queryset.filter(archived=False)
        return queryset


@dataclass(frozen=True)
class SortColumn:
    """One sortable column header: its title, the link that sorts by it, and its ARIA state.

    Attributes:
        key: the ``SORT_FIELDS`` key.
        title: the column title.
        url: ``?…`` keeping every other parameter, sorting by this column (ascending, or
            descending when it is already sorted ascending) and dropping ``page``.
        aria_sort: ``"ascending"``, ``"descending"`` or ``"none"`` (the ``th``'s ``aria-sort``).
        next_direction: ``"ascending"`` or ``"descending"``, what the link will do.
    """

    key: str
    title: str
    url: str
    aria_sort: str
    next_direction: str


def sort_columns(params: QueryDict) -> list[SortColumn]:
    """The list page's column headers for the current query string ``params``.

    Only the first ``sort`` key counts as the current sort (the page offers one at a time).
    """
    current = (params.get("sort") or "").split(",")[0]
    columns = []
    for key, (_, title) in SORT_FIELDS.items():
        if current == key:
            aria, target, direction = "ascending", f"-{key}", "descending"
        elif current == f"-{key}":
            aria, target, direction = "descending", key, "ascending"
        else:
            aria, target, direction = "none", key, "ascending"
        query = params.copy()
        query.pop("page", None)
        query["sort"] = target
        columns.append(SortColumn(key, title, f"?{query.urlencode()}", aria, direction))
    return columns
