"""A parsed filter (``registry.search.grammar``) into a Django ``Q`` over trials or experiments.

Columns compare as columns. Hyperparameters and metrics read the side table
``TrialSearchValue`` on PostgreSQL (an index range scan answers the matching trial ids) and the
JSON columns elsewhere (``Trial.hparams``, ``Trial.summary_metrics``; the embedded SQLite, and
the benchmark's baseline). Semantics (docs/search.md, docs/decisions/search.md):

- a comparison never matches a trial that lacks the value (``!=`` and ``not in`` included);
  ``not`` is the complement, so ``not (hparams.opt = "adam")`` also matches trials without it;
- a date without a time is that whole day in UTC (``start_time = 2026-11-01``);
- for experiments, each largest part of the filter that names only trial fields (hparams,
  metrics, ...) matches an experiment when at least one of its trials matches that part.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.db.models import BooleanField, CharField, ExpressionWrapper, Func, Q, Value
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce
from django.db.models.lookups import Exact

from registry.models import State, Trial, TrialSearchValue
from registry.models.search_value import MAX_TEXT_LENGTH
from registry.search.fields import Field, Kind, Target, resolve
from registry.search.grammar import And, Condition, Node, Not


class FilterValueError(ValueError):
    """A field used with an operator or a value it does not take: ``str()`` names the field."""


_RANGE = ("<", "<=", ">", ">=")
_LOOKUP = {"=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}
_OPERATORS: dict[Kind, tuple[str, ...]] = {
    Kind.INT: ("=", "!=", *_RANGE, "in", "not_in"),
    Kind.FLOAT: ("=", "!=", *_RANGE, "in", "not_in", "is_null", "not_null"),
    Kind.DATE: ("=", "!=", *_RANGE, "in", "not_in", "is_null", "not_null"),
    Kind.TEXT: ("=", "!=", "in", "not_in", "contains"),
    Kind.STATE: ("=", "!=", "in", "not_in"),
    Kind.BOOL: ("=", "!="),
    Kind.LABEL_LIST: ("contains",),
    Kind.LABEL_KEYS: ("contains",),
    Kind.LABEL_VALUE: ("=", "!=", "in", "not_in", "contains", "is_null", "not_null"),
    Kind.HPARAM: ("=", "!=", *_RANGE, "in", "not_in", "contains", "is_null", "not_null"),
    Kind.METRIC: ("=", "!=", *_RANGE, "in", "not_in", "is_null", "not_null"),
}
_SPELLING = {"not_in": "not in", "is_null": "is null", "not_null": "is not null"}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fail(field: Field, message: str) -> FilterValueError:
    return FilterValueError(f"`{field.name}` {message}")


def _numbers(field: Field, values: tuple[Any, ...]) -> list[float | int]:
    for value in values:
        if not _is_number(value):
            raise _fail(field, f"compares with numbers, not {value!r}.")
    return list(values)


def _texts(field: Field, values: tuple[Any, ...]) -> list[str]:
    out = []
    for value in values:
        if isinstance(value, bool | dt.date):
            raise _fail(field, f"compares with strings, not {value!r}.")
        out.append(str(value))
    return out


def _states(field: Field, values: tuple[Any, ...]) -> list[str]:
    out = []
    for value in _texts(field, values):
        if value.upper() not in State.values:
            raise _fail(field, f"has no state {value!r}; states: {', '.join(State.values)}.")
        out.append(value.upper())
    return out


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _compare(path: str, op: str, values: list[Any]) -> Q:
    """``path op values`` on a column; a NULL never matches ``!=`` nor ``not in``."""
    if op == "in":
        return Q(**{f"{path}__in": values})
    if op == "not_in":
        return Q(**{f"{path}__isnull": False}) & ~Q(**{f"{path}__in": values})
    if op == "!=":
        return Q(**{f"{path}__isnull": False}) & ~Q(**{path: values[0]})
    return Q(**{f"{path}__{_LOOKUP[op]}": values[0]})


def _dates(field: Field, op: str, values: tuple[Any, ...]) -> Q:
    """A date column: a datetime compares as itself, a date as its whole UTC day."""
    path = field.path or ""
    parts: list[dt.date] = []
    for value in values:
        if not isinstance(value, dt.date):
            raise _fail(
                field, f"compares with dates (2026-11-01, 2026-11-01T12:00Z), not {value!r}."
            )
        parts.append(value)
    if op in ("in", "not_in", "=", "!="):
        matches = Q()
        for value in parts:
            if isinstance(value, dt.datetime):
                matches |= Q(**{path: value})
            else:
                start = _day_start(value)
                end = start + dt.timedelta(days=1)
                matches |= Q(**{f"{path}__gte": start, f"{path}__lt": end})
        if op in ("in", "="):
            return matches
        return Q(**{f"{path}__isnull": False}) & ~matches
    value = parts[0]
    if isinstance(value, dt.datetime):
        return _compare(path, op, [value])
    start = _day_start(value)
    end = start + dt.timedelta(days=1)
    bound = {"<": ("lt", start), "<=": ("lt", end), ">": ("gte", end), ">=": ("gte", start)}
    lookup, moment = bound[op]
    return Q(**{f"{path}__{lookup}": moment})


def _column(field: Field, op: str, values: tuple[Any, ...]) -> Q:
    path = field.path or ""
    kind = field.kind
    if op == "is_null":
        return Q(**{f"{path}__isnull": True})
    if op == "not_null":
        return Q(**{f"{path}__isnull": False})
    if kind is Kind.DATE:
        return _dates(field, op, values)
    if kind in (Kind.INT, Kind.FLOAT):
        return _compare(path, op, _numbers(field, values))
    if kind is Kind.STATE:
        return _compare(path, op, _states(field, values))
    if kind is Kind.BOOL:
        if not isinstance(values[0], bool):
            raise _fail(field, f"compares with true or false, not {values[0]!r}.")
        return _compare(path, op, list(values))
    if kind is Kind.LABEL_KEYS:
        return Q(**{f"{path}__has_key": _texts(field, values)[0]})
    if kind is Kind.LABEL_LIST:
        label = _texts(field, values)[0]
        if connection.vendor == "postgresql":
            return Q(**{f"{path}__contains": [label]})
        # SQLite has no JSON containment: the label as JSON text inside the stored list.
        return Q(**{f"{path}__icontains": f'"{label}"'})
    texts = _texts(field, values)
    if op == "contains":
        return Q(**{f"{path}__icontains": texts[0]})
    return _compare(path, op, texts)


def _typed(field: Field, values: tuple[Any, ...]) -> tuple[list[float | int], list[str]]:
    """A hyperparameter's values split into numbers and strings (a boolean is the side
    table's ``"true"``/``"false"``)."""
    numbers: list[float | int] = []
    texts: list[str] = []
    for value in values:
        if isinstance(value, bool):
            texts.append("true" if value else "false")
        elif _is_number(value):
            numbers.append(value)
        elif isinstance(value, str):
            texts.append(value[:MAX_TEXT_LENGTH])
        else:
            raise _fail(field, f"compares with numbers, strings or booleans, not {value!r}.")
    return numbers, texts


def _side_table(field: Field, op: str, values: tuple[Any, ...]) -> Q:
    """A hyperparameter or metric through ``TrialSearchValue`` (PostgreSQL): the trial ids of
    the key's matching rows, from the ``(key, num|text, trial)`` indexes alone."""
    rows = TrialSearchValue.objects.filter(key=field.key)

    def trials(matching) -> Q:
        return Q(pk__in=matching.values("trial_id"))

    if op == "not_null":
        return trials(rows)
    if op == "is_null":
        return ~trials(rows)
    texts: list[str]
    if field.kind is Kind.METRIC:
        numbers, texts = _numbers(field, values), []
    else:
        numbers, texts = _typed(field, values)
    if op == "contains":
        if numbers:
            raise _fail(field, "contains compares with a string.")
        return trials(rows.filter(text__icontains=texts[0]))
    if op in _RANGE:
        if texts:
            raise _fail(field, f"{op} compares with numbers, not {values[0]!r}.")
        return trials(rows.filter(**{f"num__{_LOOKUP[op]}": numbers[0]}))
    matches = Q()
    if numbers:
        matches |= Q(num__in=numbers)
    if texts:
        matches |= Q(text__in=texts)
    if op in ("=", "in"):
        return trials(rows.filter(matches))
    # != / not in: trials that have the value and it is none of these.
    return trials(rows.exclude(matches))


def _json_path(field: Field) -> str:
    """The ORM lookup path of a JSON value (``hparams__opt__lr``)."""
    parts = field.json
    if any("__" in part or not part for part in parts):
        raise _fail(field, "cannot be searched on this database (a name part holds `__`).")
    return "__".join(parts)


def _json_typed(field: Field, kind: str) -> Q:
    """The JSON value at ``field.json`` is of ``kind`` (PostgreSQL's ``jsonb_typeof``)."""
    value: Any = field.json[0]
    for part in field.json[1:]:
        value = KeyTransform(part, value)
    typeof = Func(value, function="jsonb_typeof", output_field=CharField())
    return Q(Exact(typeof, Value(kind)))


def _json(field: Field, op: str, values: tuple[Any, ...]) -> Q:
    """``_json_condition`` made two-valued: a missing key makes SQL's comparisons NULL, and
    ``NOT NULL`` is NULL, so ``not`` would drop trials without the value instead of keeping
    them (the side table's ``NOT IN`` keeps them)."""
    condition = ExpressionWrapper(_json_condition(field, op, values), output_field=BooleanField())
    return Q(Exact(Coalesce(condition, Value(False)), Value(True)))


def _json_condition(field: Field, op: str, values: tuple[Any, ...]) -> Q:
    """A hyperparameter, metric or label value through Django's JSON key lookups: what the
    side table does on PostgreSQL, by scanning (the embedded SQLite; the bench's baseline)."""
    path = _json_path(field)
    if op == "is_null":
        return Q(**{f"{path}__isnull": True})
    if op == "not_null":
        return Q(**{f"{path}__isnull": False})
    postgres = connection.vendor == "postgresql"
    if field.kind is Kind.METRIC:
        _numbers(field, values)
        if postgres:
            # jsonb orders every string below every number: a "NaN" must not pass `< 0.2`.
            return _json_typed(field, "number") & _compare(path, op, list(values))
    if op == "contains":
        if field.kind is Kind.HPARAM and any(not isinstance(v, str) for v in values):
            raise _fail(field, "contains compares with a string.")
        matches = Q(**{f"{path}__icontains": _texts(field, values)[0]})
        return _json_typed(field, "string") & matches if postgres else matches
    if op in _RANGE and not _is_number(values[0]):
        raise _fail(field, f"{op} compares with numbers, not {values[0]!r}.")
    if op in _RANGE and postgres:
        return _json_typed(field, "number") & _compare(path, op, list(values))
    if field.kind is Kind.HPARAM and op in ("!=", "not_in") and postgres:
        # As the side table: only a number, string or boolean is a value to differ from.
        scalar = _json_typed(field, "number") | _json_typed(field, "string")
        return (scalar | _json_typed(field, "boolean")) & _compare(path, op, list(values))
    return _compare(path, op, list(values))


def _condition(field: Field, cond: Condition, *, indexed: bool) -> Q:
    allowed = _OPERATORS[field.kind]
    if cond.op not in allowed:
        spelled = ", ".join(_SPELLING.get(op, op) for op in allowed)
        raise _fail(
            field, f"does not take `{_SPELLING.get(cond.op, cond.op)}`; it takes {spelled}."
        )
    if field.kind in (Kind.HPARAM, Kind.METRIC):
        if indexed and field.key is not None:
            return _side_table(field, cond.op, cond.values)
        return _json(field, cond.op, cond.values)
    if field.kind is Kind.LABEL_VALUE:
        # Labels are strings: a number compares as its text (``labels.epoch = 3``).
        return _json(field, cond.op, tuple(_texts(field, cond.values)))
    return _column(field, cond.op, cond.values)


def _trial_level(node: Node, target: Target) -> bool:
    if isinstance(node, Condition):
        return resolve(node.field, target).trial_level
    if isinstance(node, Not):
        return _trial_level(node.part, target)
    return all(_trial_level(part, target) for part in node.parts)


Leaf = Callable[[Condition, bool], Q]


def _build(node: Node, leaf: Leaf, group: Callable[[Node], Q | None], side: bool = True) -> Q:
    """``node`` as a ``Q``; ``leaf(condition, side)`` compiles a condition, ``group`` may
    answer a whole subtree instead. ``side`` is cleared below an ``or`` or a ``not``: there
    PostgreSQL probes every trial anyway (an ``IN`` subquery under ``OR`` becomes a hashed
    subplan over all trials), and the scan of the JSON columns measured faster than the side
    table's subqueries (bench/run_filter.py); conditions joined by ``and`` from the top keep
    the side table's index range scans."""
    grouped = group(node)
    if grouped is not None:
        return grouped
    if isinstance(node, Condition):
        return leaf(node, side)
    if isinstance(node, Not):
        return ~_build(node.part, leaf, group, False)
    inner = side and isinstance(node, And)
    combined = _build(node.parts[0], leaf, group, inner)
    for part in node.parts[1:]:
        nxt = _build(part, leaf, group, inner)
        combined = combined & nxt if isinstance(node, And) else combined | nxt
    return combined


def use_side_table() -> bool:
    """Whether hyperparameters and metrics are read from ``TrialSearchValue`` (its triggers
    exist on PostgreSQL only)."""
    return connection.vendor == "postgresql"


def to_q(tree: Node, target: Target, *, indexed: bool | None = None) -> Q:
    """The ``Q`` of ``tree`` on ``Trial`` (``target`` TRIAL) or ``Experiment`` (EXPERIMENT).

    ``indexed`` picks how hyperparameters and metrics are read: the side table (default on
    PostgreSQL) or the JSON columns (``False``; the default elsewhere).

    Raises:
        UnknownField: a name that is no field of ``target``.
        FilterValueError: an operator or value the field does not take.
    """
    side = use_side_table() if indexed is None else indexed

    def trial_leaf(cond: Condition, here: bool) -> Q:
        return _condition(resolve(cond.field, Target.TRIAL), cond, indexed=side and here)

    if target is Target.TRIAL:
        return _build(tree, trial_leaf, lambda node: None)

    def experiment_leaf(cond: Condition, here: bool) -> Q:
        return _condition(resolve(cond.field, Target.EXPERIMENT), cond, indexed=side and here)

    def trials_part(node: Node) -> Q | None:
        # The largest trial-only part: one subquery over the trials, so that
        # ``hparams.lr < 1e-3 and accuracy > 0.9`` asks for one trial with both.
        if not _trial_level(node, target):
            return None
        matching = Trial.objects.filter(_build(node, trial_leaf, lambda n: None))
        return Q(pk__in=matching.values("experiment_id"))

    return _build(tree, experiment_leaf, trials_part)
