"""Model names and the text rules of models and versions (``registry.model_registry``'s
checks, also used by the REST serializers and the dashboard's forms).

A model name is 1-256 characters of ``A-Z a-z 0-9 . _ -`` starting with a letter or digit
(``MODEL_NAME_RE``), so it is a URL path segment as is (``/models/{name}/``).
"""

from __future__ import annotations

import re
from typing import Any

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from registry.errors import InvalidInput
from registry.user_text import DESCRIPTION_MAX, check_fields, validate_labels, validate_text

MODEL_NAME_MAX = 256
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# The same rule for URL patterns (router lookups, dashboard paths).
MODEL_NAME_PATTERN = MODEL_NAME_RE.pattern


def validate_model_name(name: Any) -> str:
    """``name`` when it is a valid model name (see the module docstring), else ``InvalidInput``.

    Raises:
        InvalidInput: ``{"name": [why]}``.
    """
    if not isinstance(name, str) or not name:
        raise InvalidInput({"name": ["Must be a non-empty string."]})
    if len(name) > MODEL_NAME_MAX:
        raise InvalidInput({"name": [f"Must be at most {MODEL_NAME_MAX} characters."]})
    if not MODEL_NAME_RE.fullmatch(name):
        raise InvalidInput(
            {
                "name": [
                    "Use letters, digits, '.', '_' and '-' only, starting with a letter or digit."
                ]
            }
        )
    return name


def clean_notes(
    *,
    description: str | None = None,
    comment: str | None = None,
    labels: list[str] | None = None,
) -> dict[str, Any]:
    """The given (not None) fields checked with ``registry.user_text``'s rules.

    Raises:
        InvalidInput: ``{field: [why]}`` for every bad field.
    """
    checks: dict[str, Any] = {}
    if description is not None:
        checks["description"] = lambda: validate_text(description, "description", DESCRIPTION_MAX)
    if comment is not None:
        checks["comment"] = lambda: validate_text(comment, "comment", DESCRIPTION_MAX)
    if labels is not None:
        checks["labels"] = lambda: validate_labels(labels)
    return check_fields(checks)


def with_label(qs: QuerySet[Any], label: str) -> QuerySet[Any]:
    """Rows of ``qs`` whose JSON ``labels`` list holds ``label`` exactly.

    PostgreSQL uses JSON containment (``@>``); SQLite lacks it, so there the list's elements are
    compared one by one with ``json_each``.
    """
    if connection.features.supports_json_field_contains:
        return qs.filter(labels__contains=[label])
    table = qs.model._meta.db_table
    has_label = RawSQL(
        f'EXISTS (SELECT 1 FROM json_each("{table}"."labels") WHERE json_each.value = %s)',
        (label,),
        output_field=BooleanField(),
    )
    return qs.alias(has_label=has_label).filter(has_label=True)
