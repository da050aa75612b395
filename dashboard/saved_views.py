"""Saved views (``dashboard.models.SavedView``): list, save and delete, with every field checked.

A view on an experiment is read as the experiment is (the caller has already fetched the
experiment through ``registry.authz.scoped``); a view of the experiment list is seen by every
user. Its owner or a site admin (``registry.authz.is_admin``) deletes it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from dashboard.filters import SORT_FIELDS
from dashboard.models import MAX_VIEW_NAME, SavedView
from dashboard.table_query import MAX_FILTER_LENGTH, parse_columns
from dashboard.trials_table import SORT_KEYS
from registry.authz import is_admin
from registry.errors import InvalidInput
from registry.models import Experiment, Trial
from registry.search import Target, filter_queryset


def _listed(views: QuerySet[SavedView], user: Any) -> list[SavedView]:
    out = list(views.select_related("owner"))
    for view in out:
        view.deletable = can_delete(user, view)  # type: ignore[attr-defined]
    return out


def for_experiment(experiment: Experiment, user: Any) -> list[SavedView]:
    """The views of ``experiment``'s trials table, by name, with their owners and
    ``deletable`` (may ``user`` delete it), 1 query."""
    return _listed(SavedView.objects.filter(experiment=experiment), user)


def for_list(user: Any) -> list[SavedView]:
    """The views of the experiment list, by name, as ``for_experiment`` (1 query)."""
    return _listed(SavedView.objects.filter(experiment__isnull=True), user)


def _check_filter(text: str, target: Target) -> str:
    text = text.strip()
    if len(text) > MAX_FILTER_LENGTH:
        raise InvalidInput({"filter": [f"At most {MAX_FILTER_LENGTH} characters."]})
    model = Trial if target is Target.TRIAL else Experiment
    filter_queryset(model.objects.none(), text, target)  # raises InvalidInput naming filter
    return text


def _check_sort(sort: str, keys: list[str]) -> str:
    sort = sort.strip()
    if sort and sort.removeprefix("-") not in keys:
        raise InvalidInput({"sort": [f"`{sort}` is no sort key of this table."]})
    return sort


def view_save(
    *,
    owner: Any,
    experiment: Experiment | None,
    name: str,
    filter_text: str,
    sort: str,
    columns: str,
) -> SavedView:
    """Save (or, for the same owner, experiment and name, replace) a view.

    ``experiment`` None saves a view of the experiment list, which has no chosen columns.
    ``columns`` is comma-separated, as ``?columns=``.

    Raises:
        InvalidInput: naming ``name`` (empty or longer than ``MAX_VIEW_NAME``), ``filter`` (the
            parser's message), ``columns`` (an unknown or non-metric column; any column on
            the list) or ``sort`` (no key of the table).
    """
    name = name.strip()
    if not name or len(name) > MAX_VIEW_NAME:
        raise InvalidInput({"name": [f"Give a name of 1 to {MAX_VIEW_NAME} characters."]})
    if experiment is None:
        if columns.strip():
            raise InvalidInput({"columns": ["The experiment list has no chosen columns."]})
        text = _check_filter(filter_text, Target.EXPERIMENT)
        sort = _check_sort(sort, list(SORT_FIELDS))
        names: list[str] = []
    else:
        text = _check_filter(filter_text, Target.TRIAL)
        chosen, errors = parse_columns([columns])
        if errors:
            raise InvalidInput({"columns": errors})
        names = [c.name for c in chosen]
        sort = _check_sort(sort, [*SORT_KEYS, *names])
    with transaction.atomic():
        view, _ = SavedView.objects.update_or_create(
            owner=owner,
            experiment=experiment,
            name=name,
            defaults={"filter": text, "sort": sort, "columns": names},
        )
    return view


def can_delete(user: Any, view: SavedView) -> bool:
    """True for the view's owner and site admins."""
    return bool(user.is_authenticated and (view.owner_id == user.id or is_admin(user)))
