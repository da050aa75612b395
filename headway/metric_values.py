"""How metric values travel and are stored: the one encoding of non-finite floats.

JSON has no NaN or infinity and PostgreSQL's jsonb rejects them, so NaN, +inf and -inf travel
(SDK -> REST) and are stored as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``; readers
turn them back into floats, and charts into gaps. Used by the SDK's reporters and by the
registry's ingestion, serializers and readers.
"""

from __future__ import annotations

import math
from typing import Any

NAN = "NaN"
POS_INF = "Infinity"
NEG_INF = "-Infinity"
NON_FINITE_NAMES: tuple[str, ...] = (NAN, POS_INF, NEG_INF)
_DECODED = {NAN: math.nan, POS_INF: math.inf, NEG_INF: -math.inf}


def encode_float(value: float) -> float | str:
    """A float as it travels and is stored: itself if finite, else its name (``"NaN"``...)."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return NAN
    return POS_INF if value > 0 else NEG_INF


def encode_value(value: Any) -> Any:
    """``encode_float`` for a float; any other JSON value is returned as it is."""
    return encode_float(value) if isinstance(value, float) else value


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
