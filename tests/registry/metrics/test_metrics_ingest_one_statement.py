"""A one-point report's writes in one statement keep the trial's summary exact.

On PostgreSQL a small batch of new steps writes its raw rows, series, buckets and the trial's
row in one statement, the trial's ``summary_metrics`` predicted from the stored summary and the
batch; the series rows are the truth. These tests check the summary against the series rows
after mixes of values (gaps, text, ties, steps out of order), after series loaded without a
summary (``bulk_load``), and count the statements. They run on SQLite too (the other path),
where the summary must agree in the same way.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry.api import authentication
from registry.metrics._aggregate import AGG_FIELDS
from registry.models import MetricReport, MetricSeries, Trial

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_token_cache():
    authentication.clear_token_cache()
    yield
    authentication.clear_token_cache()


def post(api, trial: Trial, *reports: dict):
    response = api.post(
        f"/api/v1/trials/{trial.id}/metrics/", {"reports": list(reports)}, format="json"
    )
    assert response.status_code == 200, response.content
    return response


def one(step: int, group: str = "training", **metrics) -> dict:
    return {"group": group, "steps_completed": step, "metrics": metrics}


def series_summary(trial: Trial) -> dict:
    """``summary_metrics`` as the series rows say it should be."""
    out: dict = {}
    for row in MetricSeries.objects.filter(trial=trial).values("group", "name", *AGG_FIELDS):
        out.setdefault(row["group"], {})[row["name"]] = {
            "last": row["last_value"],
            "last_step": row["last_step"],
            "min": row["min_value"],
            "max": row["max_value"],
            "count": row["count"],
        }
    return out


def test_one_report_after_the_lock_is_one_statement_on_postgresql(api, trial):
    post(api, trial, one(20, loss=0.5))  # progress reaches 1.0: later reports skip it
    with CaptureQueriesContext(connection) as queries:
        post(api, trial, one(21, loss=0.25))
    control = ("SAVEPOINT", "RELEASE SAVEPOINT", "BEGIN", "COMMIT")
    work = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(control)]
    # The user's right to write (one read: the trial's owner, workspace and everyone-role),
    # the locked read of the trial, then the writes: one statement on PostgreSQL; on SQLite
    # raw row, series, buckets (one executemany) and the trial. A run token skips the first.
    assert len(work) == (3 if connection.vendor == "postgresql" else 6), work
    trial.refresh_from_db()
    assert trial.steps_completed == 21
    assert trial.summary_metrics == series_summary(trial)
    assert trial.summary_metrics["training"]["loss"] == {
        "last": 0.25,
        "last_step": 21,
        "min": 0.25,
        "max": 0.5,
        "count": 2,
    }


def test_the_summary_follows_the_series_through_gaps_text_ties_and_new_names(api, trial):
    values = [3.0, "NaN", 1.0, 1.0, "Infinity", 7.5, -2.0, 7.5, "text", None]
    for step, value in enumerate(values, start=1):
        post(api, trial, one(step, loss=value, **({"acc": step / 10} if step % 3 == 0 else {})))
        trial.refresh_from_db()
        assert trial.summary_metrics == series_summary(trial), step
    loss = trial.summary_metrics["training"]["loss"]
    assert (loss["min"], loss["max"], loss["count"]) == (-2.0, 7.5, len(values))
    assert loss["last_step"] == len(values) and loss["last"] is None
    assert trial.summary_metrics["training"]["acc"]["count"] == 3


def test_a_series_that_starts_with_gaps_gets_its_first_number(api, trial):
    post(api, trial, one(1, loss="NaN"))
    post(api, trial, one(2, loss=None))
    post(api, trial, one(3, loss=4.0))
    trial.refresh_from_db()
    loss = trial.summary_metrics["training"]["loss"]
    assert (loss["min"], loss["max"], loss["last"], loss["count"]) == (4.0, 4.0, 4.0, 3)
    assert trial.summary_metrics == series_summary(trial)


def test_series_loaded_without_a_summary_are_counted_by_the_next_report(api, trial):
    """``bulk_load`` writes series but no summary: the statement's prediction is wrong and the
    series' returned aggregate wins (written again in the same transaction)."""
    from registry.metrics._bulk import bulk_load

    steps = np.arange(100, dtype=np.int64)
    values = np.cos(steps / 10.0)
    bulk_load(trial.id, "training", steps, {"loss": values}, started_at=datetime.now(UTC))
    post(api, trial, one(100, loss=0.0))
    trial.refresh_from_db()
    loss = trial.summary_metrics["training"]["loss"]
    assert loss["count"] == 101
    assert math.isclose(loss["min"], float(values.min())) and loss["max"] == 1.0
    assert (loss["last"], loss["last_step"]) == (0.0, 100)
    assert trial.summary_metrics == series_summary(trial)


def test_a_replayed_report_is_stored_once_and_counted_once(api, trial):
    post(api, trial, one(1, loss=2.0), one(2, loss=1.0))
    post(api, trial, one(2, loss=1.0))  # a retry of a report already stored
    post(api, trial, one(3, loss=0.5))
    assert MetricReport.objects.filter(trial=trial).count() == 3
    trial.refresh_from_db()
    assert trial.summary_metrics["training"]["loss"]["count"] == 3
    assert trial.summary_metrics == series_summary(trial)


def test_validation_reports_set_best_validation_in_the_same_request(api, trial):
    metric = trial.experiment.searcher_metric
    post(api, trial, one(1, "validation", **{metric: 0.8}))
    post(api, trial, one(2, "validation", **{metric: 0.3}))
    post(api, trial, one(3, "validation", **{metric: 0.6}))
    trial.refresh_from_db()
    trial.experiment.refresh_from_db()
    assert trial.best_validation == 0.3 == trial.experiment.best_validation
    assert trial.summary_metrics == series_summary(trial)


def test_a_report_without_metrics_moves_the_step_only(api, trial):
    post(api, trial, one(1, loss=1.0))
    post(api, trial, one(5))
    trial.refresh_from_db()
    assert trial.steps_completed == 5
    assert trial.summary_metrics["training"]["loss"]["count"] == 1
    assert MetricReport.objects.filter(trial=trial).count() == 2
