"""The dashboard's number format (``sig4``): 4 significant digits in JavaScript's layout, the
exact value in ``title`` / ``data-exact``; the same text as ``static/js/format.js`` (checked in
``tests/dashboard/test_dashboard_trials_legend_browser.py``)."""

from __future__ import annotations

import math

import pytest
from django.template import Context, Template

from dashboard.templatetags.numbers import exact_text, sig4, sig4_text

CASES = [
    (0.0006482765922226792, "0.0006483"),
    (123456.7, "123500"),
    (9.99996, "10"),
    (-0.5, "-0.5"),
    (0.1, "0.1"),
    (2.0, "2"),
    (12345, "12345"),
    (1.23456e-5, "0.00001235"),
    (6.5e-8, "6.5e-8"),
    (1e-7, "1e-7"),
    (1.5e22, "1.5e+22"),
    (math.nan, "NaN"),
    (-math.inf, "-Infinity"),
    (None, "\u2013"),
    ("adam", "adam"),
    (True, "True"),
]


@pytest.mark.parametrize(("value", "text"), CASES)
def test_sig4_text(value, text):
    assert sig4_text(value) == text


def test_exact_text_keeps_every_digit_in_javascript_layout():
    assert exact_text(0.0006482765922226792) == "0.0006482765922226792"
    assert exact_text(1e-7) == "1e-7"  # Python's repr says 1e-07
    assert exact_text(1.5e22) == "1.5e+22"
    assert exact_text(3) == "3"


def test_sig4_filter_wraps_numbers_with_the_exact_value():
    html = Template("{% load numbers %}{{ v|sig4 }}|{{ v|sig4text }}|{{ s|sig4 }}").render(
        Context({"v": 0.0006482765922226792, "s": "<b>"})
    )
    exact = "0.0006482765922226792"
    assert html == (
        f'<span class="num" title="{exact}" data-exact="{exact}">0.0006483</span>'
        "|0.0006483|&lt;b&gt;"
    )
    assert sig4(None) == "\u2013"
