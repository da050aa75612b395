"""How metric values travel and are stored: the one encoding of non-finite floats.

JSON has no NaN or infinity and PostgreSQL's jsonb rejects them, so NaN, +inf and -inf travel
(SDK -> REST) and are stored as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``; readers
turn them back into floats, and charts into gaps. Used by the SDK's reporters and by the
registry's ingestion, serializers and readers.
"""

from __future__ import annotations

import math
import sys
from typing import Any

NAN = "NaN"
POS_INF = "Infinity"
NEG_INF = "-Infinity"
NON_FINITE_NAMES: tuple[str, ...] = (NAN, POS_INF, NEG_INF)
_DECODED = {NAN: math.nan, POS_INF: math.inf, NEG_INF: -math.inf}

# The longest string a metric value may be, or hold anywhere inside a list or mapping, in
# characters (docs/rest-api.md, "Metric values"). Metrics are numbers to chart; text is for a
# label or a short note, and every string is stored in each report row and returned whole by
# the live reads. The SDK refuses a longer one before sending, the registry answers 400.
MAX_TEXT_CHARS = 4096
# The largest integer a metric value may be (in magnitude): one a 64-bit float can hold, so a
# value can be charted and summarised (min/max) like any other number.
MAX_INT = int(sys.float_info.max)
# The deepest a list or mapping value may nest (encoding and reading recurse per level).
MAX_DEPTH = 32


def encode_float(value: float) -> float | str:
    """A float as it travels and is stored: itself if finite, else its name (``"NaN"``...)."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return NAN
    return POS_INF if value > 0 else NEG_INF


def encode_value(value: Any) -> Any:
    """``encode_float`` for a float, also inside lists and mappings (a nested NaN would make
    the stored JSON invalid for PostgreSQL); any other JSON value is returned as it is."""
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, list):
        return [encode_value(item) for item in value]
    if isinstance(value, dict):
        return {key: encode_value(item) for key, item in value.items()}
    return value


def value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a metric value, or None when it can.

    Refused, anywhere inside lists and mappings too: a NUL character in a string or key
    (PostgreSQL cannot store one), a string over ``MAX_TEXT_CHARS`` characters, an integer
    beyond ``MAX_INT`` in magnitude; and nesting deeper than ``MAX_DEPTH``. Walks the value
    without recursion.
    """
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        kind = type(item)
        if kind is float or item is None or kind is bool:
            continue
        if isinstance(item, str):
            if "\x00" in item:
                return "NUL characters are not allowed in metrics."
            if len(item) > MAX_TEXT_CHARS:
                return f"A text value may be at most {MAX_TEXT_CHARS} characters, got {len(item)}."
        elif isinstance(item, int):
            if not -MAX_INT <= item <= MAX_INT:
                return "An integer must fit a 64-bit float (at most about 1.8e308 in magnitude)."
        elif depth == MAX_DEPTH:
            return f"A value may nest lists and mappings at most {MAX_DEPTH} levels deep."
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
        elif isinstance(item, dict):
            if any("\x00" in key for key in item):
                return "NUL characters are not allowed in metrics."
            pending.extend((child, depth + 1) for child in item.values())
    return None


def decode_number(value: Any) -> float | None:
    """The float a stored or received value means: numbers and the non-finite names.

    Returns None for anything that is not a number (bools, other strings, lists, None).
    """
    if isinstance(value, str):
        return _DECODED.get(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def chartable(value: Any) -> float | None:
    """The value a chart plots: a finite float, or None (a gap) for anything else."""
    number = decode_number(value)
    return number if number is not None and math.isfinite(number) else None


def encode_and_chart(value: Any) -> tuple[Any, float | None]:
    """``(encode_value(value), chartable(value))`` in one step, fast for plain numbers.

    Ingestion converts every value both ways; floats and ints are nearly all of them.
    """
    kind = type(value)
    if kind is float:
        if math.isfinite(value):
            return value, value
        return encode_float(value), None
    if kind is int:
        return value, float(value)
    encoded = encode_value(value)
    return encoded, chartable(encoded)
