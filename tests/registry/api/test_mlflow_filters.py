"""MLflow's search syntax as the MLflow-compatible API reads it (registry/api/mlflow/filters.py)
and its metric-key mapping (entities.py)."""

from __future__ import annotations

import pytest

from registry.api.mlflow import filters
from registry.api.mlflow.entities import metric_group, metric_key, series_of_key
from registry.api.mlflow.errors import MlflowError


def _run(run_id: str, acc: float | None, lr: str, status: str, start: int) -> dict:
    return {
        "metrics": {} if acc is None else {"acc": acc},
        "params": {"lr": lr},
        "tags": {"team": "vision" if run_id != "3" else "nlp", "dotted.key": run_id},
        "attributes": {
            "status": status,
            "run_name": f"run-{run_id}",
            "run_id": run_id,
            "start_time": start,
            "end_time": None,
        },
    }


RUNS = [
    _run("1", 0.9, "0.1", "FINISHED", 100),
    _run("2", 0.4, "0.01", "FAILED", 200),
    _run("3", None, "0.1", "RUNNING", 300),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ["1", "2", "3"]),
        ("metrics.acc > 0.5", ["1"]),
        ("metrics.acc <= 0.9 and params.lr = '0.01'", ["2"]),
        ("params.lr != '0.1'", ["2"]),
        ("tags.team = 'vision' AND attributes.status IN ('FAILED', 'RUNNING')", ["2"]),
        ("attributes.status NOT IN ('FAILED')", ["1", "3"]),
        ("run_name LIKE 'run-%'", ["1", "2", "3"]),
        ("attributes.run_name ILIKE 'RUN-_'", ["1", "2", "3"]),
        ("tags.`dotted.key` = '3'", ["3"]),
        ("tags.dotted.key = '2'", ["2"]),
        ('metrics."acc" >= 0.4', ["1", "2"]),
        ("attributes.start_time > 150", ["2", "3"]),
        ("metric.acc = 0.9", ["1"]),
    ],
)
def test_filters_select_runs(text: str, expected: list[str]) -> None:
    clauses = filters.parse_filter(text)
    assert [r["attributes"]["run_id"] for r in RUNS if filters.matches(r, clauses)] == expected


@pytest.mark.parametrize(
    "text",
    [
        "metrics.acc > 0.5 OR params.lr = '0.1'",
        "metrics.acc > 'high'",
        "params.lr > '0.1'",
        "params.lr = 0.1",
        "foo.bar = '1'",
        "attributes.artifact_uri = 'x'",
        "metrics.acc >",
        "metrics.acc 0.5",
        "tags.team IN 'vision'",
        "tags.team = 'unterminated",
    ],
)
def test_bad_filters_are_invalid_parameter_values(text: str) -> None:
    with pytest.raises(MlflowError) as bad:
        filters.parse_filter(text)
    assert bad.value.code == "INVALID_PARAMETER_VALUE"


def test_order_by_puts_missing_values_last_and_breaks_ties_by_start_time() -> None:
    ties = [("attributes", "start_time", True, True)]
    by_acc = filters.ordered(RUNS, filters.parse_order_by(["metrics.acc DESC"]), ties)
    assert [r["attributes"]["run_id"] for r in by_acc] == ["1", "2", "3"]
    by_acc = filters.ordered(RUNS, filters.parse_order_by(["metrics.acc"]), ties)
    assert [r["attributes"]["run_id"] for r in by_acc] == ["2", "1", "3"]
    by_lr = filters.ordered(RUNS, filters.parse_order_by(["params.lr ASC"]), ties)
    assert [r["attributes"]["run_id"] for r in by_lr] == ["2", "3", "1"]
    with pytest.raises(MlflowError):
        filters.parse_order_by(["nonsense.x"])


def test_page_tokens_round_trip_and_foreign_ones_are_refused() -> None:
    assert filters.page_offset(filters.page_token(40)) == 40
    assert filters.page_offset(None) == 0
    for token in ("garbage", filters.page_token(-1), "eyJ4IjogMX0="):
        with pytest.raises(MlflowError):
            filters.page_offset(token)


@pytest.mark.parametrize(
    ("key", "group"),
    [
        ("loss", "training"),
        ("val_loss", "validation"),
        ("eval_accuracy", "validation"),
        ("validation/loss", "validation"),
        ("val/acc", "validation"),
        ("evaluation", "training"),
        ("interval_loss", "training"),
    ],
)
def test_metric_keys_choose_their_group(key: str, group: str) -> None:
    assert metric_group(key) == group
    assert metric_key(group, key) == key  # what MLflow logged reads back under its own key
    assert series_of_key(key)[0] == (group, key)


def test_series_of_headways_sdk_get_keys_that_lead_back_to_them() -> None:
    assert metric_key("validation", "loss") == "validation/loss"
    assert ("validation", "loss") in series_of_key("validation/loss")
    assert metric_key("inference", "latency") == "inference/latency"
    assert ("inference", "latency") in series_of_key("inference/latency")
