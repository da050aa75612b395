"""``headway.metric_values``: the one encoding of non-finite metric values."""

from __future__ import annotations

import json
import math

import pytest

from headway.metric_values import (
    MAX_DEPTH,
    MAX_TEXT_CHARS,
    chartable,
    decode_number,
    encode_float,
    encode_value,
    value_problem,
)


@pytest.mark.parametrize(
    ("value", "wire"),
    [(1.5, 1.5), (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")],
)
def test_floats_round_trip_through_strict_json(value: float, wire: object) -> None:
    encoded = encode_float(value)
    assert encoded == wire
    decoded = decode_number(json.loads(json.dumps(encoded, allow_nan=False)))
    assert decoded is not None
    assert decoded == value or (math.isnan(decoded) and math.isnan(value))


def test_other_values_pass_through_and_are_not_numbers() -> None:
    assert encode_value("text") == "text"
    assert encode_value(3) == 3
    assert encode_value(math.inf) == "Infinity"
    for value in (True, "Nan", None, [1.0], {"a": 1}):
        assert decode_number(value) is None


def test_charts_show_non_finite_values_as_gaps() -> None:
    assert chartable(2) == 2.0
    assert chartable("NaN") is None
    assert chartable(math.inf) is None
    assert chartable("-Infinity") is None
    assert chartable(False) is None


def test_report_timestamps_are_iso_utc_across_second_boundaries(monkeypatch):
    import datetime

    from headway.core import _metrics

    for now in (1732348799.999999, 1732348800.000001, 1732348800.5, 1732348801.25):
        monkeypatch.setattr(_metrics.time, "time", lambda now=now: now)
        stamp = _metrics.utc_timestamp()
        assert stamp.endswith("Z") and len(stamp) == len("2024-11-23T08:00:00.000000Z")
        parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        assert abs(parsed.timestamp() - now) < 2e-6


def test_nested_non_finite_floats_are_encoded_by_name() -> None:
    # A nested NaN made the stored JSON invalid for PostgreSQL (a 500).
    value = [math.nan, {"a": math.inf, "b": [-math.inf, 1.0]}]
    assert encode_value(value) == ["NaN", {"a": "Infinity", "b": ["-Infinity", 1.0]}]


def test_value_problem_names_what_the_registry_refuses() -> None:
    assert value_problem(["x" * MAX_TEXT_CHARS, {"k": 10**300}, None, True]) is None
    assert "at most 4096" in (value_problem("x" * (MAX_TEXT_CHARS + 1)) or "")
    assert "at most" in (value_problem([{"k": ["y" * 20_000]}]) or "")
    assert "64-bit float" in (value_problem({"k": -(10**400)}) or "")
    assert "NUL" in (value_problem({"k\x00": 1}) or "")
    deep: list = []
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    assert value_problem(deep) is None
    for _ in range(100_000):  # walked without recursion
        deep = [deep]
    assert "levels deep" in (value_problem(deep) or "")


def test_sdk_refuses_a_string_metric_over_the_cap_before_sending() -> None:
    from headway.core._metrics import json_safe_metrics

    assert json_safe_metrics({"note": "x" * MAX_TEXT_CHARS}) == {"note": "x" * MAX_TEXT_CHARS}
    with pytest.raises(ValueError, match=r"metric 'note' has a string value of 4097 characters"):
        json_safe_metrics({"note": "x" * (MAX_TEXT_CHARS + 1)})
    with pytest.raises(ValueError, match="'big' has an integer beyond"):
        json_safe_metrics({"big": [10**400]})
    # Checkpoint metadata is not a metric: no cap there.
    metadata = json_safe_metrics({"text": "y" * 10_000}, metric_limits=False)
    assert metadata == {"text": "y" * 10_000}
