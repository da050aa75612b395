"""The dashboard's filter box and chosen columns, read from the query string.

``?filter=`` is the filter language of docs/search.md, applied with the REST API's own
``registry.search.filter_queryset`` (one parser for every surface). ``?columns=`` names extra
columns of the trials table, comma-separated or repeated (``?columns=validation_loss,hparams.lr``):
each a summary metric (``validation_loss``, ``training.loss``, ``metrics.a.b``) or a
hyperparameter (``hparams.optimizer.lr``), named as ``?order_by=`` names them, so a column sorts
through ``registry.search.order``.

A malformed filter or column does not fail the page: it is left out and its message is shown
under the box with "(ignored)", as the experiment list reports its other bad filter values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.db.models import Q, QuerySet

from dashboard.overview import metric_keys
from registry.errors import InvalidInput
from registry.models import Experiment
from registry.search import Target, filter_queryset
from registry.search.fields import Kind, UnknownField, resolve

MAX_COLUMNS = 10
"""Extra columns one table may show."""
MAX_COLUMN_NAME = 200
"""Characters of one column name (a saved view's sort holds one)."""
MAX_FILTER_LENGTH = 2000
"""Characters of a filter the dashboard takes (a saved view stores it)."""
_COLUMN_KINDS = (Kind.METRIC, Kind.HPARAM)


@dataclasses.dataclass(frozen=True)
class Column:
    """A chosen column: ``name`` as the filter language spells it, ``kind`` (metric or
    hyperparameter) and ``json`` (the path of its value on the trial, column first)."""

    name: str
    kind: Kind
    json: tuple[str, ...]

    def value(self, trial: Any) -> Any:
        """The trial's value of this column (a metric's latest value), None when it has none."""
        value: Any = getattr(trial, self.json[0], None)
        for part in self.json[1:]:
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value


def parse_column(name: str) -> Column:
    """The column ``name`` names.

    Raises:
        ValueError: the name is empty, longer than ``MAX_COLUMN_NAME``, holds a comma or
            space, is no field of a trial, or is a field that is no metric or hyperparameter
            (the message names it).
    """
    if len(name) > MAX_COLUMN_NAME:
        raise ValueError(f"A column name has at most {MAX_COLUMN_NAME} characters.")
    if not name or any(ch in name for ch in ", \t"):
        raise ValueError(f"`{name}` is no column name.")
    try:
        field = resolve(name, Target.TRIAL)
    except UnknownField as exc:
        raise ValueError(str(exc)) from None
    if field.kind not in _COLUMN_KINDS:
        raise ValueError(f"`{name}` is no metric or hyperparameter.")
    return Column(name, field.kind, field.json)


def parse_columns(values: Iterable[str]) -> tuple[list[Column], list[str]]:
    """The columns of ``?columns=`` (each value comma-separated), in order, without
    repeats, at most ``MAX_COLUMNS``, and the messages of those left out."""
    columns: list[Column] = []
    errors: list[str] = []
    for value in values:
        for raw in value.split(","):
            name = raw.strip()
            if not name or any(c.name == name for c in columns):
                continue
            if len(columns) == MAX_COLUMNS:
                errors.append(f"At most {MAX_COLUMNS} columns; `{name}` left out.")
                continue
            try:
                columns.append(parse_column(name))
            except ValueError as exc:
                errors.append(str(exc))
    return columns, errors


def column_choices(
    experiment: Experiment,
    hparam_names: Iterable[str],
    metrics: list[dict[str, str]] | None = None,
) -> list[str]:
    """The column names the Columns control offers for ``experiment``: its validation and
    training metrics (``metrics``, ``overview.metric_keys``' answer; read when None, 1 query),
    then ``hparams.<name>`` per flattened hyperparameter name. Other metric groups are not in
    the filter language."""
    if metrics is None:
        metrics = metric_keys(Q(trial__experiment_id=experiment.id))
    names = []
    for key in metrics:
        group, name = key["group"], key["name"]
        if group == "training":
            names.append(f"training.{name}")
        elif group == "validation":
            bare = "." not in name and resolve(name, Target.TRIAL).kind is Kind.METRIC
            names.append(name if bare else f"validation.{name}")
    return names + [f"hparams.{name}" for name in hparam_names]


def apply_filter(queryset: QuerySet, text: str, target: Target) -> tuple[QuerySet, str | None]:
    """``queryset`` narrowed by the filter ``text`` (empty: unchanged) and ``None``; or
    ``queryset`` unchanged and the parser's message when ``text`` is malformed or longer
    than ``MAX_FILTER_LENGTH``."""
    if len(text) > MAX_FILTER_LENGTH:
        return queryset, f"At most {MAX_FILTER_LENGTH} characters."
    try:
        return filter_queryset(queryset, text, target), None
    except InvalidInput as exc:
        return queryset, filter_message(exc)


def filter_message(exc: InvalidInput) -> str:
    """The message of ``filter_queryset``'s ``{"filter": [message]}`` error."""
    return " ".join(exc.errors.get("filter") or [exc.detail])


@dataclasses.dataclass
class TableQuery:
    """What the trials table was asked for: ``filter`` (the text as typed), ``filter_error``
    (the parser's message, the filter then being ignored), ``columns`` and
    ``column_errors``, ``sort`` (a parsed sort key)."""

    filter: str = ""
    filter_error: str | None = None
    columns: list[Column] = dataclasses.field(default_factory=list)
    column_errors: list[str] = dataclasses.field(default_factory=list)
    sort: str = ""

    @property
    def column_names(self) -> str:
        """The columns as ``?columns=`` takes them (comma-separated)."""
        return ",".join(c.name for c in self.columns)

    @property
    def active_filter(self) -> str:
        """The filter actually applied ("" when none or ignored)."""
        return "" if self.filter_error else self.filter.strip()

    def params(self, **changes: str) -> str:
        """The query string (no ``?``) of this table with ``changes`` (``sort``, ``page``);
        empty values are left out."""
        values = {
            "filter": self.active_filter,
            "columns": self.column_names,
            "sort": self.sort,
            **changes,
        }
        return urlencode({k: v for k, v in values.items() if v})
