"""The filter language's grammar (lark, LALR) and its parse into a small syntax tree.

``parse("validation_accuracy > 0.95 and hparams.lr < 1e-3")`` answers an ``Or``/``And``/``Not``
tree over ``Condition`` leaves; what a field means is ``registry.search.fields``' job, and the
tree becomes a query in ``registry.search.compile``. The syntax follows MLflow's
``search_runs`` filter strings and W&B's run filters: ``field op value``, ``in (...)``,
``contains``, ``is [not] null`` / ``exists``, ``and`` binding tighter than ``or``, ``not``
tighter than both, parentheses (docs/search.md).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cache
from typing import Any

from lark import (
    Lark,
    Token,
    Transformer,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.exceptions import VisitError

MAX_FILTER_LENGTH = 4000
"""Longest filter accepted (characters): a bound on parse work per request."""

# Keywords are case-insensitive ("AND", "In"); a bare word that is not a keyword is a NAME,
# which is a field on the left of an operator and a string value on the right (``owner =
# alice``, ``state = COMPLETED``). Lark makes a literal that its NAME pattern also matches a
# keyword of that pattern, so a field called ``notes`` or ``order`` is not read as ``not``...
_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: _NOT not_expr -> negation
         | "(" or_expr ")"
         | condition
condition: field OP value                                -> compare
         | field _IN "(" value ("," value)* ")"          -> is_in
         | field _NOT _IN "(" value ("," value)* ")"     -> not_in
         | field _CONTAINS value                         -> contains
         | field _IS _NULL                               -> is_null
         | field _IS _NOT _NULL                          -> not_null
         | field _EXISTS                                 -> not_null
field: NAME | QUOTED_NAME
value: SIGNED_NUMBER -> number
     | DATE          -> date
     | STRING        -> string
     | NAME          -> word
     | _TRUE         -> true
     | _FALSE        -> false

_OR: "or"i
_AND: "and"i
_NOT: "not"i
_IN: "in"i
_CONTAINS: "contains"i
_IS: "is"i
_NULL: "null"i
_EXISTS: "exists"i
_TRUE: "true"i
_FALSE: "false"i
OP: "!=" | "<=" | ">=" | "==" | "=" | "<" | ">"
NAME: /[A-Za-z_][A-Za-z0-9_.\/-]*/
QUOTED_NAME: /`[^`]+`/
STRING: /"(\\.|[^"\\])*"/ | /'(\\.|[^'\\])*'/
DATE.2: /\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?/
SIGNED_NUMBER: /[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/

%ignore /\s+/
"""

# What a parse error names for each terminal the parser expected.
_EXPECTED_WORDS = {
    "NAME": "a field name",
    "QUOTED_NAME": "a field name",
    "OP": "an operator (= != < <= > >=)",
    "SIGNED_NUMBER": "a value",
    "DATE": "a value",
    "STRING": "a value",
    "_TRUE": "a value",
    "_FALSE": "a value",
    "_OR": "or",
    "_AND": "and",
    "_NOT": "not",
    "_IN": "in",
    "_CONTAINS": "contains",
    "_IS": "is",
    "_NULL": "null",
    "_EXISTS": "exists",
    "LPAR": '"("',
    "RPAR": '")"',
    "COMMA": '","',
    "$END": "the end of the filter",
}


class FilterSyntaxError(ValueError):
    """The filter does not parse: ``str()`` says where (a 1-based character position) and
    what was expected there."""


@dataclass(frozen=True)
class Condition:
    """One ``field op value(s)`` leaf. ``op`` is one of ``= != < <= > >= in not_in contains
    is_null not_null``; ``values`` holds one value (none for the null tests, several for the
    ``in`` lists), each an ``int``/``float``, ``str``, ``bool``, ``datetime.date`` or
    ``datetime.datetime``; an unquoted word (``COMPLETED``, ``alice``) is a string. ``position``
    is the field's 0-based offset in the filter."""

    field: str
    op: str
    values: tuple[Any, ...]
    position: int


@dataclass(frozen=True)
class And:
    parts: tuple[Any, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Any, ...]


@dataclass(frozen=True)
class Not:
    part: Any


Node = Condition | And | Or | Not


def _unquote(text: str) -> str:
    body = text[1:-1]
    quote = text[0]
    # Only the quote itself and the backslash are escaped: other backslashes stay as written.
    return body.replace("\\\\", "\x00").replace("\\" + quote, quote).replace("\x00", "\\")


def _date(text: str) -> dt.date | dt.datetime:
    if "T" not in text:
        return dt.date.fromisoformat(text)
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class _ToTree(Transformer):
    """Lark's parse tree into ``Condition``/``And``/``Or``/``Not``."""

    def or_expr(self, parts):
        return Or(tuple(parts))

    def and_expr(self, parts):
        return And(tuple(parts))

    def negation(self, parts):
        return Not(parts[0])

    def field(self, parts):
        token: Token = parts[0]
        name = str(token)[1:-1] if token.type == "QUOTED_NAME" else str(token)
        return (name, token.start_pos or 0)

    def number(self, parts):
        text = str(parts[0])
        if any(c in text for c in ".eE"):
            return float(text)
        return int(text)

    def date(self, parts):
        return _date(str(parts[0]))

    def string(self, parts):
        return _unquote(str(parts[0]))

    def word(self, parts):
        return str(parts[0])

    def true(self, _parts):
        return True

    def false(self, _parts):
        return False

    def compare(self, parts):
        (name, pos), op, value = parts
        op = "=" if op == "==" else str(op)
        return Condition(name, op, (value,), pos)

    def is_in(self, parts):
        (name, pos), *values = parts
        return Condition(name, "in", tuple(values), pos)

    def not_in(self, parts):
        (name, pos), *values = parts
        return Condition(name, "not_in", tuple(values), pos)

    def contains(self, parts):
        (name, pos), value = parts
        return Condition(name, "contains", (value,), pos)

    def is_null(self, parts):
        (name, pos) = parts[0]
        return Condition(name, "is_null", (), pos)

    def not_null(self, parts):
        (name, pos) = parts[0]
        return Condition(name, "not_null", (), pos)


@cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", propagate_positions=False, maybe_placeholders=False)


_VALUES = {"SIGNED_NUMBER", "DATE", "STRING"}


def _expected(names: set[str] | frozenset[str]) -> str:
    if names & _VALUES:  # where a value may come, a NAME is a value too (``owner = alice``)
        names = set(names) - {"NAME", "QUOTED_NAME"}
    words = sorted({_EXPECTED_WORDS.get(name, name.lower()) for name in names})
    return ", ".join(words) if words else "nothing more"


def _error(text: str, exc: UnexpectedInput) -> FilterSyntaxError:
    position = (exc.pos_in_stream or 0) + 1 if exc.pos_in_stream is not None else len(text) + 1
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            found, position = "the end of the filter", len(text) + 1
        else:
            found = repr(str(exc.token))
        # ``accepts`` (what the parser's state really takes) is narrower than LALR's
        # ``expected``, which may name terminals of merged states.
        expected = _expected(set(exc.accepts or exc.expected))
    elif isinstance(exc, UnexpectedCharacters):
        at = exc.pos_in_stream or 0
        found = repr(text[at]) if at < len(text) else "the end of the filter"
        expected = _expected(set(exc.allowed or ()))
    elif isinstance(exc, UnexpectedEOF):
        found, position = "the end of the filter", len(text) + 1
        expected = _expected({str(name) for name in exc.expected})
    else:  # pragma: no cover - lark raises the three above
        found, expected = "something unexpected", "a valid filter"
    return FilterSyntaxError(f"At position {position}: expected {expected}; found {found}.")


def parse(text: str) -> Node:
    """The syntax tree of the filter ``text``.

    Raises:
        FilterSyntaxError: it does not parse, is empty, is longer than ``MAX_FILTER_LENGTH``
            or holds a date that does not exist; the message gives the 1-based position and
            what was expected there.
    """
    if not text.strip():
        raise FilterSyntaxError(
            "At position 1: expected a field name; found the end of the filter."
        )
    if len(text) > MAX_FILTER_LENGTH:
        raise FilterSyntaxError(f"Longer than {MAX_FILTER_LENGTH} characters.")
    try:
        tree = _parser().parse(text)
        return _ToTree().transform(tree)
    except UnexpectedInput as exc:
        raise _error(text, exc) from None
    except VisitError as exc:  # a well-formed but impossible date, e.g. 2026-02-30
        raise FilterSyntaxError(f"Invalid date: {exc.orig_exc}.") from None
