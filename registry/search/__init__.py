"""The filter language over trials and experiments (docs/search.md): ``?filter=`` and
``?order_by=`` of the REST lists, ``headway trial list --filter``.

``grammar`` parses (lark), ``fields`` says what each name means, ``compile`` makes the Django
``Q``, ``order`` sorts; the metric and hyperparameter values come from the side table
``registry.models.TrialSearchValue`` that triggers keep (migration 0028).
"""

from __future__ import annotations

from django.db.models import QuerySet

from registry.errors import InvalidInput
from registry.search.compile import FilterValueError, to_q
from registry.search.fields import Target, UnknownField
from registry.search.grammar import FilterSyntaxError, parse
from registry.search.order import order_experiments, order_trials

__all__ = ["Target", "filter_queryset", "order_queryset"]


def filter_queryset(queryset: QuerySet, text: str | None, target: Target) -> QuerySet:
    """``queryset`` (of ``target``'s model) narrowed by the filter ``text`` (None or empty:
    unchanged).

    Raises:
        InvalidInput: ``{"filter": [message]}`` when it does not parse (the message gives the
            position and what was expected), names an unknown field, or gives a field an
            operator or value it does not take (the message names the field).
    """
    if text is None or not text.strip():
        return queryset
    try:
        return queryset.filter(to_q(parse(text), target))
    except (FilterSyntaxError, UnknownField, FilterValueError) as exc:
        raise InvalidInput({"filter": [str(exc)]}) from None


def order_queryset(queryset: QuerySet, text: str | None, target: Target = Target.TRIAL) -> QuerySet:
    """``queryset`` (of ``target``'s model) sorted by ``order_by`` (``registry.search.order``);
    unchanged for None.

    Raises:
        InvalidInput: ``{"order_by": [message]}`` naming the key that does not sort.
    """
    if text is None or not text.strip():
        return queryset
    try:
        if target is Target.EXPERIMENT:
            return order_experiments(queryset, text)
        return order_trials(queryset, text)
    except (UnknownField, FilterValueError) as exc:
        raise InvalidInput({"order_by": [str(exc)]}) from None
