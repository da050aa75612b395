"""What a trial reports through ``core.train`` reaches the registry unchanged (the fast
per-call path: 0-d tensors converted without the general path, reports written with orjson and,
for what orjson refuses, with ``json``), and a bad value still fails at the call, named."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
import torch

from headway import core
from headway.core._metrics import _encode
from registry.models import Trial
from tests.headway.core.test_core_train_live import run_info  # noqa: F401  (the live run fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _csv_points(api, trial_id: int) -> dict[str, list[tuple[int, str]]]:
    """Every stored point of the trial as ``{name: [(steps_completed, value cell), ...]}``."""
    response = api.get(f"/api/v1/trials/{trial_id}/metrics.csv")
    text = b"".join(response.streaming_content).decode()
    points: dict[str, list[tuple[int, str]]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        points.setdefault(row["name"], []).append((int(row["steps_completed"]), row["value"]))
    return points


def test_reported_values_reach_the_registry_as_reported(api, run_info: Trial) -> None:  # noqa: F811
    trial = run_info
    values = {
        "tensor": torch.tensor(0.25, requires_grad=True) * 2,  # 0-d float, part of a graph
        "int_tensor": torch.tensor(7),
        "np64": np.float64(1.5),  # a float subclass: orjson refuses it as it is
        "huge": 2**70,  # beyond 64 bits: written by json, not orjson
        "text": "épreuve ✓",
        "nan": torch.tensor(float("nan")),
        "vector": torch.tensor([1.0, 2.0]),
    }
    with core.init() as ctx:
        for step in (1, 2, 3):
            ctx.train.report_training_metrics(step, values)
    points = _csv_points(api, trial.id)
    cells = {name: [cell for _, cell in rows] for name, rows in points.items()}
    assert {name: [step for step, _ in rows] for name, rows in points.items()} == {
        name: [1, 2, 3] for name in values
    }  # every step once, in order, for every metric
    assert [float(c) for c in cells["tensor"]] == [0.5] * 3
    assert [int(c) for c in cells["int_tensor"]] == [7] * 3
    assert [float(c) for c in cells["np64"]] == [1.5] * 3
    assert [int(c) for c in cells["huge"]] == [2**70] * 3
    assert cells["text"] == ["épreuve ✓"] * 3
    assert [json.loads(c) for c in cells["vector"]] == [[1.0, 2.0]] * 3
    assert all(math.isnan(float(c)) for c in cells["nan"])


def test_encoding_matches_json_for_every_kind_of_value() -> None:
    reports = [
        {"group": "training", "steps_completed": 3, "metrics": {"loss": 0.1, "acc": 1e-05}},
        {"group": "training", "steps_completed": 1, "metrics": {"n": 2**70}},  # json fallback
        {"group": "training", "steps_completed": 1, "metrics": {"s": "lone \ud800"}},
        {"group": "training", "steps_completed": 1, "metrics": {"t": 'é ✓ "q" \\ \n'}},
        {"group": "training", "steps_completed": 1, "metrics": {"x": [1.0, {"y": None}]}},
    ]
    for report in reports:
        assert json.loads(_encode(report)) == report


def test_bad_values_still_fail_at_the_call_naming_the_metric() -> None:
    with core.init() as ctx:  # local mode
        ctx.train.report_training_metrics(1, {"loss": torch.tensor(0.5)})
        with pytest.raises(TypeError, match="'weights'"):
            ctx.train.report_training_metrics(2, {"weights": object()})
        with pytest.raises(ValueError, match="steps_completed"):
            ctx.train.report_training_metrics(-1, {"loss": 0.5})
        with pytest.raises(ValueError, match="steps_completed"):
            ctx.train.report_training_metrics(2.0, {"loss": 0.5})  # type: ignore[arg-type]
        ctx.train.report_training_metrics(np.int64(3), {"loss": math.inf})
        reported = ctx.train.reported_metrics("training")
    assert [r["steps_completed"] for r in reported] == [1, 3]
    assert reported[0]["metrics"] == {"loss": 0.5}
    assert reported[1]["metrics"] == {"loss": "Infinity"}
