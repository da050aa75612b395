"""The ``sig4`` template filter: numbers to 4 significant digits, the exact value on hover and copy.

The one Python definition of the dashboard's number format; ``static/js/format.js``
(``HeadwayFormat.number``) is the browser's, and both print the same text for the same value
(JavaScript's ``Number.prototype.toString`` rules: positional between 1e-7 and 1e21, else
``1.235e+21`` / ``6.5e-8``), so a live update never changes how a number looks. Integers below
1e15 (batch counts, integer metrics) print in full: rounding them would hide information.

Usage: ``{% load numbers %}{{ value|sig4 }}`` gives ``<span class="num" title="exact"
data-exact="exact">0.0006483</span>`` (format.js puts ``data-exact`` into what a copy gets);
``{{ value|sig4text }}`` gives the bare text (for attributes).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from django import template
from django.utils.html import format_html

register = template.Library()

EMPTY = "\u2013"  # en dash: no value
SIGNIFICANT = 4
MAX_EXACT_INTEGER = 1e15  # integers below this print in full (as format.js does)


def _js_text(value: float, text: str) -> str:
    """``text`` (a Python rendering of ``value``) in JavaScript's ``Number#toString`` layout."""
    sign, digit_tuple, exponent = Decimal(text).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple)) or "0"
    assert isinstance(exponent, int)  # finite values only reach here
    sci = exponent + len(digits) - 1  # value = d.ddd x 10**sci
    minus = "-" if sign else ""
    if -7 < sci < 21:
        if sci >= 0:
            whole = digits[: sci + 1].ljust(sci + 1, "0")
            fraction = digits[sci + 1 :]
            return minus + whole + (f".{fraction}" if fraction else "")
        return minus + "0." + "0" * (-sci - 1) + digits
    mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{minus}{mantissa}e{'+' if sci > 0 else '-'}{abs(sci)}"


def _special(value: float) -> str | None:
    """JavaScript's text for NaN and infinities; None for finite values."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return None


def _not_a_float_text(value: Any) -> str | None:
    """The text of a value both formats print alike: "–" for None, ``str`` for integers and
    non-numbers; None for a float."""
    if value is None:
        return EMPTY
    if isinstance(value, float):
        return _special(value)
    return str(value)


def exact_text(value: Any) -> str:
    """The exact value as text: shortest round-trip digits for a float (``repr``), in
    JavaScript's layout (``1e-7``, not ``1e-07``); "–" for None; ``str`` for non-numbers."""
    text = _not_a_float_text(value)
    return text if text is not None else _js_text(value, repr(value))


def sig4_text(value: Any) -> str:
    """``value`` to 4 significant digits (``0.0006482765922226792`` -> ``0.0006483``).

    Integers (and integral floats) below 1e15 in full; NaN / Infinity as JavaScript prints
    them; "–" for None; non-numbers (categorical hyperparameters, booleans) as ``str``.
    """
    text = _not_a_float_text(value)
    if text is not None:
        return text
    if value.is_integer() and abs(value) < MAX_EXACT_INTEGER:
        return str(int(value))
    return _js_text(value, f"{value:.{SIGNIFICANT - 1}e}")


@register.filter
def sig4(value: Any) -> str:
    """A ``<span class="num">`` with ``value`` to 4 significant digits, the exact value in its
    ``title`` (hover) and ``data-exact`` (what a copy gets, through format.js); "–" for None,
    plain escaped text for non-numbers."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return format_html("{}", sig4_text(value))
    exact = exact_text(value)
    return format_html(
        '<span class="num" title="{}" data-exact="{}">{}</span>', exact, exact, sig4_text(value)
    )


@register.filter
def sig4text(value: Any) -> str:
    """``sig4_text`` as a filter: the 4-significant-digit text alone (for attributes)."""
    return sig4_text(value)
