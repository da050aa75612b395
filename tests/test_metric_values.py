"""``headway.metric_values``: the one encoding of non-finite metric values."""

from __future__ import annotations

import json
import math

import pytest

from headway.metric_values import chartable, decode_number, encode_float, encode_value


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
