"""The band shape of the metric reads (``band=true``): a line through each step range's last
value with the range's minimum and maximum, as the overview charts draw it."""

from __future__ import annotations

import math

import pytest

from registry.models import Trial
from tests.helpers import create_experiment

pytestmark = pytest.mark.django_db

SPIKE_STEP, SPIKE, GAP_STEP = 1234, 50.0, 2222


def training(step, **metrics):
    return {"group": "training", "steps_completed": step, "metrics": metrics}


def post(api, trial, reports):
    response = api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": reports}, format="json")
    assert response.status_code == 200, response.content


def loss(step: int) -> float | str:
    if step == SPIKE_STEP:
        return SPIKE
    if step == GAP_STEP:
        return "NaN"
    return 1.0 + math.sin(step / 40)


def series(api, trial, **params):
    response = api.get(f"/api/v1/trials/{trial.id}/metrics/", params)
    assert response.status_code == 200, response.content
    return response.json()["series"]


def test_a_downsampled_series_comes_as_a_line_with_its_extremes(api, trial):
    post(api, trial, [training(s, loss=loss(s)) for s in range(1, 3001)])
    (band,) = series(api, trial, name="loss", max_points=200, band="true")
    assert band["downsampled"] and band["count"] == 3000
    steps, values, lows, highs = band["steps"], band["values"], band["min"], band["max"]
    assert len(steps) <= 200 and len(values) == len(lows) == len(highs) == len(steps)
    assert steps == sorted(steps) and steps[-1] == 3000 and values[-1] == loss(3000)
    # The spike is in the band, not on the line (the line passes each range's last value).
    assert SPIKE in highs and SPIKE not in values
    # The gap breaks the line: a point with no value and no extremes at the gap's step.
    at = steps.index(GAP_STEP)
    assert values[at] is None and lows[at] is None and highs[at] is None
    for v, lo, hi in zip(values, lows, highs, strict=True):
        if v is not None:
            assert lo <= v <= hi
    # Fewer points than the M4 shape's four per range, for the same range count.
    (m4,) = series(api, trial, name="loss", max_points=200)
    assert "min" not in m4 and SPIKE in m4["values"] and m4["count"] == 3000


def test_a_series_that_fits_is_returned_whole_without_a_band(api, trial):
    post(api, trial, [training(s, loss=1.0 / s) for s in range(1, 51)])
    (whole,) = series(api, trial, name="loss", max_points=100, band="true")
    assert not whole["downsampled"] and whole["steps"] == list(range(1, 51))
    assert "min" not in whole and "max" not in whole


def test_a_zoom_window_in_the_band_shape(api, trial):
    post(api, trial, [training(s, loss=loss(s)) for s in range(1, 3001)])
    (zoom,) = series(api, trial, name="loss", x_min=1000, x_max=2000, max_points=50, band="true")
    assert zoom["downsampled"] and zoom["count"] == 1001
    assert zoom["steps"][0] >= 1000 and zoom["steps"][-1] == 2000
    assert SPIKE in zoom["max"]


def test_band_must_be_true_or_false(api, trial):
    response = api.get(f"/api/v1/trials/{trial.id}/metrics/", {"band": "yes"})
    assert response.status_code == 400 and "band" in response.json()["errors"]


def test_the_experiment_overview_in_the_band_shape_with_a_fixed_query_count(
    api, django_assert_max_num_queries
):
    experiment_id = create_experiment(api).json()["id"]
    url = f"/api/v1/experiments/{experiment_id}/metrics/"

    def add(n):
        for i in range(n):
            trial = Trial.objects.create(experiment_id=experiment_id, hparams={"i": i})
            post(api, trial, [training(s, loss=s * (i + 1)) for s in range(1, 700)])

    add(2)
    params = {"name": "loss", "max_points": 50, "band": "true"}
    with django_assert_max_num_queries(20) as few:
        answer = api.get(url, params)
        queries = len(few.captured_queries)
    assert answer["Content-Type"] == "application/json"
    body = answer.json()
    assert body["experiment_id"] == experiment_id and len(body["series"]) == 2
    downsampled = [s for s in body["series"] if s["downsampled"]]
    assert len(downsampled) == 2 and all(len(s["min"]) == len(s["steps"]) for s in downsampled)
    add(6)
    with django_assert_max_num_queries(queries):
        assert len(api.get(url, params).json()["series"]) == 8
