"""``?order_by=`` of the trial lists: columns, hyperparameters and metrics, several keys.

``-validation_accuracy,hparams.lr`` sorts by the latest validation accuracy, highest first, then
by the learning rate; trials without a value come last either way, and the trial id breaks ties
(a stable page order for ``limit``/``offset``).
"""

from __future__ import annotations

from django.db.models import F, FloatField, OuterRef, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast

from registry.models import TrialSearchValue
from registry.search.compile import FilterValueError, use_side_table
from registry.search.fields import Kind, Target, resolve

MAX_ORDER_KEYS = 5
"""Keys one ``order_by`` may name."""

_SORTABLE = (Kind.INT, Kind.FLOAT, Kind.DATE, Kind.TEXT, Kind.STATE, Kind.HPARAM, Kind.METRIC)


def _side_value(key: str, column: str) -> Subquery:
    row = TrialSearchValue.objects.filter(trial=OuterRef("pk"), key=key)
    return Subquery(row.values(column)[:1])


def _json_value(parts: tuple[str, ...]) -> Cast:
    value: str | KeyTransform = parts[0]
    for part in parts[1:-1]:
        value = KeyTransform(part, value)
    return Cast(KeyTextTransform(parts[-1], value), FloatField())


def order_trials(queryset: QuerySet, order_by: str) -> QuerySet:
    """``queryset`` (trials) sorted by the comma-separated keys of ``order_by``, each a field
    of the filter language (``registry.search.fields``), ``-`` first for descending.

    Raises:
        UnknownField: a key that is no trial field.
        FilterValueError: more than ``MAX_ORDER_KEYS`` keys, an empty key, or a field that does
            not sort (labels).
    """
    keys = [key.strip() for key in order_by.split(",")]
    if len(keys) > MAX_ORDER_KEYS:
        raise FilterValueError(f"Give at most {MAX_ORDER_KEYS} keys, not {len(keys)}.")
    terms = []
    annotations: dict[str, Subquery | Cast] = {}
    for index, key in enumerate(keys):
        descending = key.startswith("-")
        name = key.removeprefix("-").strip()
        if not name:
            raise FilterValueError("An empty key; give a field name, e.g. -validation_accuracy.")
        field = resolve(name, Target.TRIAL)
        if field.kind not in _SORTABLE:
            raise FilterValueError(f"`{name}` does not sort.")
        if field.kind in (Kind.HPARAM, Kind.METRIC):
            columns = ["num", "text"] if field.kind is Kind.HPARAM else ["num"]
            for column in columns:
                alias = f"_order_{index}_{column}"
                if use_side_table():
                    annotations[alias] = _side_value(field.key or "", column)
                elif column == "num":
                    annotations[alias] = _json_value(field.json)
                else:
                    continue
                terms.append(_direction(F(alias), descending))
        else:
            terms.append(_direction(F(field.path or ""), descending))
    return queryset.annotate(**annotations).order_by(*terms, "id")


def _direction(expression: F, descending: bool):
    return expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)
