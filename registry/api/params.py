"""Query-parameter parsing shared by the views: one error shape, naming the parameter."""

from __future__ import annotations

from registry.errors import InvalidInput


def optional_int_param(request, name: str, *, lo: int, hi: int) -> int | None:
    """The integer query parameter ``name`` in ``[lo, hi]``, or None when absent or empty.

    Raises:
        InvalidInput: ``{name: ["Must be an integer."]}`` or ``"Must be between lo and hi."``.
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput({name: ["Must be an integer."]}) from None
    if not lo <= value <= hi:
        raise InvalidInput({name: [f"Must be between {lo} and {hi}."]})
    return value


def int_param(request, name: str, default: int, *, lo: int, hi: int) -> int:
    """``optional_int_param`` with a ``default`` for an absent parameter."""
    value = optional_int_param(request, name, lo=lo, hi=hi)
    return default if value is None else value
