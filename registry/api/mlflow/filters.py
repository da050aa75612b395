"""MLflow's run search syntax: ``filter`` strings, ``order_by`` clauses and page tokens.

The subset of MLflow's grammar (``mlflow.utils.search_utils.SearchUtils``) for the fields this
API maps: clauses joined by ``AND`` of the form ``<entity> <comparator> <value>``, where the
entity is ``metrics.<key>`` (numbers: ``= != > >= < <=``), ``params.<key>`` or ``tags.<key>``
(strings: ``= != LIKE ILIKE IN NOT IN``), or an attribute (``attributes.<name>`` or the bare
name): ``status``, ``run_name``, ``run_id`` (strings) and ``start_time``, ``end_time``
(milliseconds). A key with spaces or dots is quoted in backticks or double quotes
(``metrics.`val loss` < 1``); values are quoted strings, numbers, or for ``IN`` a parenthesized
list of strings. ``OR`` is not part of MLflow's grammar and is refused like any other syntax
error. Runs are plain mappings here (``RunFacts``); the views load them from the database.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from registry.api.mlflow.errors import invalid


@dataclass(frozen=True)
class Attributes:
    """The attributes an entity is searched by: numbers (milliseconds) and strings."""

    numeric: frozenset[str]
    strings: frozenset[str]


RUN_ATTRIBUTES = Attributes(
    frozenset({"start_time", "end_time"}), frozenset({"status", "run_name", "run_id"})
)
EXPERIMENT_ATTRIBUTES = Attributes(
    frozenset({"creation_time", "last_update_time", "experiment_id"}), frozenset({"name"})
)
# MLflow's spellings of the entity types.
_ENTITY_TYPES = {
    "metric": "metrics",
    "metrics": "metrics",
    "param": "params",
    "params": "params",
    "parameter": "params",
    "parameters": "params",
    "tag": "tags",
    "tags": "tags",
    "attribute": "attributes",
    "attributes": "attributes",
    "attr": "attributes",
    "run": "attributes",
}
_NUMERIC_OPS = frozenset({"=", "!=", ">", ">=", "<", "<="})
_STRING_OPS = frozenset({"=", "!=", "LIKE", "ILIKE", "IN", "NOT IN"})
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<op>!=|>=|<=|=|>|<)
      | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.])
      | (?P<word>[A-Za-z_][\w]*(?:\.(?:`[^`]*`|"[^"]*"|[\w\-/:.]+))?)
      | (?P<paren>[(),])
    )""",
    re.VERBOSE,
)

# A run as the filter sees it: "metrics"/"params"/"tags" mappings and "attributes".
RunFacts = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Clause:
    """One ``<kind>.<key> <op> <value>`` comparison; ``value`` is a float, a str or a tuple."""

    kind: str
    key: str
    op: str
    value: Any
    numeric: bool


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise invalid(f"Invalid filter {text!r}: cannot parse at {text[pos : pos + 20]!r}.")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "`\"'":
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def _entity(word: str, attributes: Attributes) -> tuple[str, str, bool]:
    if "." in word:
        prefix, key = word.split(".", 1)
        kind = _ENTITY_TYPES.get(prefix.lower())
        if kind is None:
            raise invalid(
                f"Invalid entity type {prefix!r} in filter: use metrics., params., tags. or "
                "attributes."
            )
        key = _unquote(key)
    else:
        kind, key = "attributes", word
    known = attributes.numeric | attributes.strings
    if kind == "attributes" and key not in known:
        allowed = ", ".join(sorted(known))
        raise invalid(f"Invalid attribute {key!r}; searchable attributes: {allowed}.")
    return kind, key, kind == "metrics" or (kind == "attributes" and key in attributes.numeric)


def parse_filter(text: str | None, attributes: Attributes = RUN_ATTRIBUTES) -> list[Clause]:
    """Parse a ``filter`` string into clauses (all must hold); ``""``/None: no clause.

    Raises:
        MlflowError: ``INVALID_PARAMETER_VALUE`` naming what cannot be parsed: an unknown
            entity type or attribute, a comparator the entity does not take, a value of the
            wrong type, ``OR``.
    """
    tokens = _tokens(text or "")
    clauses: list[Clause] = []
    i = 0
    while i < len(tokens):
        if clauses:
            if tokens[i][0] != "word" or tokens[i][1].upper() != "AND":
                raise invalid(f"Invalid filter {text!r}: clauses are joined by AND only.")
            i += 1
        if i >= len(tokens):
            raise invalid(f"Invalid filter {text!r}: a clause is '<entity> <comparator> <value>'.")
        kind_tok, word = tokens[i]
        if kind_tok != "word":
            raise invalid(f"Invalid filter {text!r}: expected an entity, got {word!r}.")
        kind, key, numeric = _entity(word, attributes)
        i += 1
        op, i = _comparator(tokens, i, text or "")
        value, i = _value(tokens, i, op, text or "")
        allowed = _NUMERIC_OPS if numeric else _STRING_OPS
        if op not in allowed:
            raise invalid(
                f"Invalid comparator {op!r} for {kind}.{key}; allowed: {', '.join(sorted(allowed))}."
            )
        if numeric and not isinstance(value, float):
            raise invalid(f"Expected a number for {kind}.{key}, got {value!r}.")
        if not numeric and isinstance(value, float):
            raise invalid(f"Expected a quoted string for {kind}.{key}, got {value!r}.")
        clauses.append(Clause(kind, key, op, value, numeric))
    return clauses


def _comparator(tokens: list[tuple[str, str]], i: int, text: str) -> tuple[str, int]:
    if i >= len(tokens):
        raise invalid(f"Invalid filter {text!r}: a comparator is missing.")
    kind, word = tokens[i]
    if kind == "op":
        return word, i + 1
    upper = word.upper()
    if kind == "word" and upper in ("LIKE", "ILIKE", "IN"):
        return upper, i + 1
    if (
        kind == "word"
        and upper == "NOT"
        and i + 1 < len(tokens)
        and tokens[i + 1][1].upper() == "IN"
    ):
        return "NOT IN", i + 2
    raise invalid(f"Invalid filter {text!r}: expected a comparator, got {word!r}.")


def _value(tokens: list[tuple[str, str]], i: int, op: str, text: str) -> tuple[Any, int]:
    if i >= len(tokens):
        raise invalid(f"Invalid filter {text!r}: a value is missing.")
    kind, word = tokens[i]
    if op in ("IN", "NOT IN"):
        if word != "(":
            raise invalid(f"Invalid filter {text!r}: {op} takes a list like ('a', 'b').")
        values, i = [], i + 1
        while i < len(tokens) and tokens[i][1] != ")":
            if tokens[i][0] != "string":
                raise invalid(f"Invalid filter {text!r}: {op} lists hold quoted strings.")
            values.append(_unquote(tokens[i][1]))
            i += 1
            if i < len(tokens) and tokens[i][1] == ",":
                i += 1
        if i >= len(tokens):
            raise invalid(f"Invalid filter {text!r}: the list is not closed.")
        return tuple(values), i + 1
    if kind == "string":
        return _unquote(word), i + 1
    if kind == "number":
        return float(word), i + 1
    raise invalid(f"Invalid filter {text!r}: expected a value, got {word!r}.")


def _like(pattern: str, value: str, flags: int) -> bool:
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, flags | re.DOTALL) is not None


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "LIKE": lambda a, b: _like(b, a, 0),
    "ILIKE": lambda a, b: _like(b, a, re.IGNORECASE),
    "IN": lambda a, b: a in b,
    "NOT IN": lambda a, b: a not in b,
}


def matches(run: RunFacts, clauses: Iterable[Clause]) -> bool:
    """Whether ``run`` satisfies every clause; a run without the metric/param/tag does not
    (as MLflow's SQL store: the join finds no row)."""
    for clause in clauses:
        value = run[clause.kind].get(clause.key)
        if value is None:
            return False
        if clause.numeric:
            try:
                value = float(value)
            except (TypeError, ValueError):
                return False
        if not _COMPARE[clause.op](value, clause.value):
            return False
    return True


def parse_order_by(
    entries: Iterable[str] | None, attributes: Attributes = RUN_ATTRIBUTES
) -> list[tuple[str, str, bool, bool]]:
    """``["metrics.loss ASC", "start_time DESC"]`` → ``[(kind, key, numeric, descending)]``.

    Raises:
        MlflowError: ``INVALID_PARAMETER_VALUE`` for an unknown entity or direction.
    """
    out = []
    for entry in entries or ():
        parts = entry.strip().rsplit(None, 1)
        descending = False
        if len(parts) == 2 and parts[1].upper() in ("ASC", "DESC"):
            descending = parts[1].upper() == "DESC"
            target = parts[0]
        else:
            target = entry.strip()
        if not target:
            raise invalid(f"Invalid order_by clause {entry!r}.")
        kind, key, numeric = _entity(target, attributes)
        out.append((kind, key, numeric, descending))
    return out


def ordered(
    runs: list[dict[str, Any]],
    order: list[tuple[str, str, bool, bool]],
    tie_breaks: list[tuple[str, str, bool, bool]],
) -> list[dict[str, Any]]:
    """Sort ``runs`` (``RunFacts`` dicts) by ``order``, then ``tie_breaks`` (MLflow's: start
    time, newest first, then id); runs missing a key come last in either direction."""
    result = list(runs)
    for kind, key, numeric, descending in reversed([*order, *tie_breaks]):

        def sort_key(
            run: dict[str, Any], kind: str = kind, key: str = key, num: bool = numeric
        ) -> Any:
            value = run[kind].get(key)
            if num and value is not None:
                try:
                    value = float(value)
                except (TypeError, ValueError):
                    value = None
            return value

        present = [r for r in result if sort_key(r) is not None]
        missing = [r for r in result if sort_key(r) is None]
        present.sort(key=sort_key, reverse=descending)
        result = present + missing
    return result


def page_token(offset: int) -> str:
    """The opaque token of the page starting at ``offset``."""
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def page_offset(token: str | None) -> int:
    """The offset a ``page_token`` stands for (0 for none).

    Raises:
        MlflowError: ``INVALID_PARAMETER_VALUE`` for a token this API did not make.
    """
    if not token:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(token.encode()))["offset"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise invalid(f"Invalid page_token {token!r}.") from None
    if not isinstance(offset, int) or offset < 0:
        raise invalid(f"Invalid page_token {token!r}.")
    return offset
