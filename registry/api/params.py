"""Query-parameter parsing shared by the views: one error shape, naming the parameter."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter

from registry.errors import InvalidInput

# Plain decimal digits only: Python's int() also takes "1_000", " 7 " and non-ASCII digits.
_INTEGER = re.compile(r"-?[0-9]+")


def optional_int_param(request, name: str, *, lo: int, hi: int) -> int | None:
    """The integer query parameter ``name`` in ``[lo, hi]``, or None when absent (an empty
    value is not an integer: a 400, never silently the default).

    Raises:
        InvalidInput: ``{name: ["Must be an integer."]}``, ``"Must be between lo and hi."`` or,
            given more than once (``?limit=1&limit=2``: an array where the schema says one
            integer), ``"Give one value, not N."``.
    """
    raw = single_value(request, name)
    return None if raw is None else _parse_int(name, raw, lo, hi)


def single_value(request, name: str) -> str | None:
    """The one value of the query parameter ``name``, or None when absent.

    Raises:
        InvalidInput: ``{name: ["Give one value, not N."]}`` when it is repeated: taking the
            last (Django's ``QueryDict.get``) would accept an array the schema does not allow
            and silently ignore the other values.
    """
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise InvalidInput({name: [f"Give one value, not {len(values)}."]})
    return values[0] if values else None


def bool_param(request, name: str) -> bool | None:
    """The query parameter ``name`` as a boolean (``true`` / ``false``), or None when absent.

    Raises:
        InvalidInput: ``{name: ["Must be true or false."]}`` for any other value (an empty
            one included), or as ``single_value`` when it is repeated.
    """
    raw = single_value(request, name)
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise InvalidInput({name: ["Must be true or false."]})
    return raw == "true"


def _parse_int(name: str, raw: str, lo: int, hi: int) -> int:
    if not _INTEGER.fullmatch(raw):
        raise InvalidInput({name: [f"Must be an integer, got {raw[:40]!r}."]})
    # Longer than any bound: out of range without converting (int() refuses > 4300 digits).
    value = int(raw) if len(raw) <= 20 else hi + 1
    if not lo <= value <= hi:
        raise InvalidInput({name: [f"Must be between {lo} and {hi}."]})
    return value


def int_param(request, name: str, default: int, *, lo: int, hi: int) -> int:
    """``optional_int_param`` with a ``default`` for an absent parameter."""
    value = optional_int_param(request, name, lo=lo, hi=hi)
    return default if value is None else value


def int_list_param(request, name: str, *, lo: int, hi: int) -> list[int]:
    """Every value of the repeatable integer query parameter ``name``, each in ``[lo, hi]``.

    Raises:
        InvalidInput: as ``optional_int_param``, for the first bad value.
    """
    return [_parse_int(name, raw, lo, hi) for raw in request.query_params.getlist(name)]


def int_query_parameter(
    name: str, *, lo: int, hi: int, description: str = "", many: bool = False
) -> OpenApiParameter:
    """The schema of an integer query parameter parsed by ``optional_int_param(lo, hi)`` (or,
    ``many``, a repeatable one parsed by ``int_list_param``)."""
    schema: dict = {"type": "integer", "minimum": lo, "maximum": hi}
    if many:
        schema = {"type": "array", "items": schema}
    return OpenApiParameter(name, schema, description=description)


_NUL_MESSAGE = "NUL characters are not allowed."
# The schema of a text query parameter: PostgreSQL cannot compare text holding a NUL.
TEXT_PATTERN = r"^[^\x00]*$"


def text_param(request, name: str) -> str | None:
    """The text query parameter ``name``, or None when absent or empty.

    Raises:
        InvalidInput: ``{name: ["NUL characters are not allowed."]}`` (PostgreSQL refuses NUL in
            text, so the query would fail as a 500, or a streamed answer halfway through), or
            as ``single_value`` when it is repeated.
    """
    single_value(request, name)
    values = text_list_param(request, name)
    return values[-1] if values else None


def text_list_param(request, name: str) -> list[str]:
    """Every non-empty value of the repeatable text query parameter ``name``.

    Raises:
        InvalidInput: as ``text_param``.
    """
    values = request.query_params.getlist(name)
    if any("\x00" in value for value in values):
        raise InvalidInput({name: [_NUL_MESSAGE]})
    return [value for value in values if value]
