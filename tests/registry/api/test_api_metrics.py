"""REST: batch metric reports (idempotent, validated, non-finite as gaps) and series reads."""

import math

import pytest

from registry.models import MetricReport

pytestmark = pytest.mark.django_db


def post(api, trial, reports):
    return api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": reports}, format="json")


def training(step, **metrics):
    return {"group": "training", "steps_completed": step, "metrics": metrics}


def test_it_stores_a_batch_and_keeps_summaries(api, trial):
    reports = [training(s, loss=1.0 / s) for s in range(1, 11)]
    reports.append(
        {"group": "validation", "steps_completed": 10, "metrics": {"validation_loss": 0.3}}
    )
    response = post(api, trial, reports)
    assert response.status_code == 200 and response.json() == {"accepted": 11}
    trial.refresh_from_db()
    loss = trial.summary_metrics["training"]["loss"]
    assert loss == {"last": 0.1, "last_step": 10, "min": 0.1, "max": 1.0, "count": 10}
    assert trial.steps_completed == 10 and trial.best_validation == 0.3
    assert trial.experiment.__class__.objects.get(id=trial.experiment_id).best_validation == 0.3


def test_it_is_idempotent_and_later_reports_supersede(api, trial):
    post(api, trial, [training(s, loss=float(s)) for s in (1, 2, 3)])
    post(api, trial, [training(s, loss=float(s)) for s in (1, 2, 3)])  # a retry
    post(api, trial, [training(3, loss=0.5)])  # a restarted run re-reports step 3
    rows = MetricReport.objects.filter(trial=trial).order_by("steps_completed")
    assert [(r.steps_completed, r.metrics["loss"]) for r in rows] == [(1, 1.0), (2, 2.0), (3, 0.5)]
    trial.refresh_from_db()
    assert trial.summary_metrics["training"]["loss"]["count"] == 3
    assert trial.summary_metrics["training"]["loss"]["max"] == 2.0
    assert trial.summary_metrics["training"]["loss"]["last"] == 0.5


def test_non_finite_values_are_stored_and_read_as_gaps(api, trial):
    # The SDK sends the strings; a client using Python's json sends the bare literals.
    post(api, trial, [training(1, loss="NaN"), training(2, loss="Infinity"), training(3, loss=2.0)])
    raw = '{"reports": [{"group": "training", "steps_completed": 4, "metrics": {"loss": NaN}}]}'
    response = api.post(f"/api/v1/trials/{trial.id}/metrics/", raw, content_type="application/json")
    assert response.status_code == 200, response.content
    stored = [
        r.metrics["loss"]
        for r in MetricReport.objects.filter(trial=trial).order_by("steps_completed")
    ]
    assert stored == ["NaN", "Infinity", 2.0, "NaN"]
    series = api.get(f"/api/v1/trials/{trial.id}/metrics/?group=training&name=loss").json()[
        "series"
    ]
    assert series[0]["steps"] == [1, 2, 3, 4] and series[0]["values"] == [None, None, 2.0, None]


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"group": "training", "metrics": {"loss": 1}}, "reports[1].steps_completed"),
        ({"group": "training", "steps_completed": -1, "metrics": {}}, "reports[1].steps_completed"),
        ({"group": "Bad Group", "steps_completed": 1, "metrics": {}}, "reports[1].group"),
        ({"group": "training", "steps_completed": 1, "metrics": [1]}, "reports[1].metrics"),
        (
            {"group": "training", "steps_completed": 1, "metrics": {}, "extra": 1},
            "reports[1].extra",
        ),
        # Found by schemathesis: pydantic's lax mode took booleans and strings as numbers.
        (
            {"group": "training", "steps_completed": True, "metrics": {}},
            "reports[1].steps_completed",
        ),
        (
            {"group": "training", "steps_completed": "2", "metrics": {}},
            "reports[1].steps_completed",
        ),
        (
            {"group": "training", "steps_completed": 2.0, "metrics": {}},
            "reports[1].steps_completed",
        ),
        (
            {"group": "training", "steps_completed": 2, "metrics": {}, "run_id": False},
            "reports[1].run_id",
        ),
        (
            {"group": "training", "steps_completed": 2, "metrics": {}, "epoch": True},
            "reports[1].epoch",
        ),
    ],
)
def test_a_bad_report_rejects_the_whole_batch(api, trial, report, field):
    response = post(api, trial, [training(1, loss=1.0), report])
    assert response.status_code == 400
    assert field in response.json()["errors"], response.json()
    assert MetricReport.objects.filter(trial=trial).count() == 0


def test_it_rejects_a_body_without_reports(api, trial):
    response = api.post(f"/api/v1/trials/{trial.id}/metrics/", {"nope": []}, format="json")
    assert response.status_code == 400 and "reports" in response.json()["errors"]


def test_series_are_downsampled_keeping_extremes(api, trial):
    values = [math.sin(s / 50.0) for s in range(5000)]
    values[1234] = 99.0  # a spike must survive
    post(api, trial, [training(s, loss=v) for s, v in enumerate(values)])
    series = api.get(f"/api/v1/trials/{trial.id}/metrics/?max_points=500").json()["series"]
    (loss,) = series
    assert loss["count"] == 5000 and loss["downsampled"] is True
    assert len(loss["steps"]) <= 502
    assert loss["steps"] == sorted(loss["steps"])
    assert 99.0 in loss["values"] and 1234 in loss["steps"]
    assert api.get(f"/api/v1/trials/{trial.id}/metrics/?max_points=2").status_code == 400
