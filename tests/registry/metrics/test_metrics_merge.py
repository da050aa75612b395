"""Reports of one step merge per metric (REST, as a client sends them).

A report of a ``(trial, group, steps_completed)`` already stored adds its metrics to the stored
report of the same run, the later value winning for a metric reported twice; a report of
another run replaces it whole (a restarted run supersedes). Retries stay idempotent, and the
series, buckets and the trial's summary and ``best_validation`` stay what the raw reports say.
These tests run on SQLite by default and on PostgreSQL with ``DATABASE_URL``; the pipelined
PostgreSQL path runs them again (``test_metrics_ingest_pipelined``).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry.metrics import read_series
from registry.models import MetricReport, MetricSeries, Trial
from tests.registry.metrics.test_metric_store import expected_buckets, stored_buckets
from tests.registry.metrics.test_metrics_ingest_one_statement import one, post, series_summary

pytestmark = pytest.mark.django_db


def stored(trial: Trial, group: str = "training") -> dict[int, dict]:
    """``{step: metrics}`` of the trial's raw reports of ``group``."""
    rows = MetricReport.objects.filter(trial=trial, group=group)
    return dict(rows.values_list("steps_completed", "metrics"))


def consistent(trial: Trial) -> Trial:
    """The trial, re-read, once its series, buckets and summary agree with its raw reports."""
    trial.refresh_from_db()
    assert stored_buckets(trial) == expected_buckets(trial)
    assert trial.summary_metrics == series_summary(trial)
    return trial


def test_a_second_report_of_a_step_adds_its_metrics(api, trial):
    post(api, trial, one(20, loss=0.5, learning_rate=0.1))
    post(api, trial, one(20, train_loss=0.7, train_runtime=12.5))  # HF Trainer's last log
    assert stored(trial) == {
        20: {"loss": 0.5, "learning_rate": 0.1, "train_loss": 0.7, "train_runtime": 12.5}
    }
    summary = consistent(trial).summary_metrics["training"]
    assert set(summary) == {"loss", "learning_rate", "train_loss", "train_runtime"}
    assert all(entry["count"] == 1 and entry["last_step"] == 20 for entry in summary.values())
    answer = api.get(f"/api/v1/trials/{trial.id}/metrics/?group=training&max_points=0").json()
    assert {(s["name"], tuple(s["steps"]), tuple(s["values"])) for s in answer["series"]} == {
        ("loss", (20,), (0.5,)),
        ("learning_rate", (20,), (0.1,)),
        ("train_loss", (20,), (0.7,)),
        ("train_runtime", (20,), (12.5,)),
    }


def test_two_reports_of_a_step_in_one_batch_merge(api, trial):
    post(api, trial, one(20, loss=0.5), one(20, grad_norm=2.0), one(20, loss=0.25))
    assert stored(trial) == {20: {"loss": 0.25, "grad_norm": 2.0}}
    assert consistent(trial).summary_metrics["training"]["loss"]["count"] == 1


def test_two_reports_of_a_step_in_one_batch_from_two_runs_keep_the_later_run(api, trial):
    post(
        api,
        trial,
        {**one(20, loss=1.0), "run_id": 1},
        {**one(20, acc=0.5), "run_id": 2},
        {**one(20, lr=0.1), "run_id": 2},
    )
    assert stored(trial) == {20: {"acc": 0.5, "lr": 0.1}}
    assert "loss" not in consistent(trial).summary_metrics["training"]


def test_a_metric_reported_again_at_a_step_takes_the_later_value(api, trial):
    for step in range(20, 25):
        post(api, trial, one(step, loss=float(step), acc=step / 100))
    post(api, trial, one(22, loss=-1.0))  # a new minimum, acc untouched
    assert stored(trial)[22] == {"loss": -1.0, "acc": 0.22}
    loss = consistent(trial).summary_metrics["training"]["loss"]
    assert (loss["min"], loss["max"], loss["count"], loss["last"]) == (-1.0, 24.0, 5, 24.0)
    post(api, trial, one(22, loss=99.0))  # the minimum is gone: recomputed, not kept
    post(api, trial, one(24, loss=0.0))  # the last value changes
    loss = consistent(trial).summary_metrics["training"]["loss"]
    assert (loss["min"], loss["max"], loss["count"]) == (0.0, 99.0, 5)
    assert (loss["last"], loss["last_step"]) == (0.0, 24)
    assert consistent(trial).summary_metrics["training"]["acc"]["count"] == 5


def test_a_retried_batch_changes_nothing(api, trial):
    first = [one(step, loss=1.0 / step) for step in range(20, 30)]
    second = [one(29, eval_loss=0.3), one(30, loss=0.01)]
    for _ in range(3):  # sent, then retried twice (answers lost)
        post(api, trial, *first)
        post(api, trial, *second)
    assert MetricReport.objects.filter(trial=trial).count() == 11
    assert stored(trial)[29] == {"loss": 1.0 / 29, "eval_loss": 0.3}
    summary = consistent(trial).summary_metrics["training"]
    assert summary["loss"]["count"] == 11 and summary["eval_loss"]["count"] == 1
    assert summary["loss"]["last"] == 0.01 and summary["loss"]["max"] == 1.0 / 20


def test_a_merge_recomputes_only_what_changed(api, trial):
    post(api, trial, *(one(step, loss=float(step)) for step in range(20, 40)))
    table = connection.ops.quote_name("registry_metricbucket")

    def bucket_deletes(*reports: dict) -> int:
        with CaptureQueriesContext(connection) as queries:
            post(api, trial, *reports)
        return sum(
            q["sql"].startswith("DELETE") and table in q["sql"] for q in queries.captured_queries
        )

    assert bucket_deletes(one(30, eval_loss=0.5)) == 0  # a new metric: appended
    assert bucket_deletes(one(30, loss=30.0, eval_loss=0.5)) == 0  # a retry: nothing to do
    assert bucket_deletes(one(30, loss=3.0)) > 0  # a changed value: its buckets rebuilt
    assert consistent(trial).summary_metrics["training"]["eval_loss"]["count"] == 1


def test_a_batch_of_new_stored_and_changed_steps_keeps_series_exact(api, trial):
    post(api, trial, *(one(step, loss=float(step), acc=0.5) for step in range(20, 100, 3)))
    # Stored steps with a new metric, a changed one, an identical one, and steps never stored
    # (some inside the same level-0 buckets), in one batch.
    post(
        api,
        trial,
        one(23, extra=1.0),
        one(26, loss=-5.0),
        one(29, loss=29.0),
        one(30, loss=30.5, extra="text"),
        one(98, loss="NaN"),
        one(120, loss=1.0),
    )
    rows = stored(trial)
    assert rows[23] == {"loss": 23.0, "acc": 0.5, "extra": 1.0}
    assert rows[26] == {"loss": -5.0, "acc": 0.5} and rows[98] == {"loss": "NaN", "acc": 0.5}
    summary = consistent(trial).summary_metrics["training"]
    assert summary["loss"]["min"] == -5.0 and summary["loss"]["count"] == 29
    assert summary["extra"]["count"] == 2 and summary["acc"]["count"] == 27
    (loss,) = read_series(trial_id=trial.id, names=["loss"], max_points=0)
    assert loss["values"][loss["steps"].index(98)] is None


def test_best_validation_follows_the_merged_searcher_metric(api, trial):
    metric = trial.experiment.searcher_metric  # validation_loss, smaller is better
    post(api, trial, one(20, "validation", **{metric: 0.3}))
    post(api, trial, one(20, "validation", accuracy=0.9))  # another metric: best unchanged
    assert consistent(trial).best_validation == 0.3
    post(api, trial, one(20, "validation", **{metric: 0.1}))
    assert consistent(trial).best_validation == 0.1
    post(api, trial, one(20, "validation", **{metric: 0.4}))  # the later value wins, worse
    trial = consistent(trial)
    assert trial.best_validation == 0.4
    assert stored(trial, "validation") == {20: {metric: 0.4, "accuracy": 0.9}}


def test_a_report_of_another_run_replaces_the_step_whole(api, trial):
    def run(run_id: int, step: int, **metrics) -> dict:
        return {**one(step, **metrics), "run_id": run_id}

    # Run 1 reports steps 20-22, then fails; run 2 resumes from the checkpoint at step 20.
    post(api, trial, *(run(1, step, loss=1.0, acc=0.5) for step in (20, 21, 22)))
    post(api, trial, run(2, 21, loss=0.25))
    post(api, trial, run(2, 21, lr=0.01))  # run 2's second report of the step merges
    assert stored(trial) == {
        20: {"loss": 1.0, "acc": 0.5},
        21: {"loss": 0.25, "lr": 0.01},
        22: {"loss": 1.0, "acc": 0.5},
    }
    assert MetricReport.objects.get(trial=trial, steps_completed=21).run_id == 2
    summary = consistent(trial).summary_metrics["training"]
    assert summary["acc"]["count"] == 2 and summary["loss"]["min"] == 0.25
    # A run's reports that lose every point of a metric leave no series of it.
    post(api, trial, run(2, 20, loss=0.5), run(2, 22, loss=0.5))
    assert not MetricSeries.objects.filter(trial=trial, name="acc").exists()
    assert "acc" not in consistent(trial).summary_metrics["training"]
