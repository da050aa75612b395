"""The metric store: bucket aggregates, reads at any zoom, idempotent ingestion, on either DB."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from datetime import UTC, datetime
from itertools import pairwise

import numpy as np
import pytest
from django.db import connection

from registry.metrics import (
    BASE_WIDTH,
    LEVELS,
    Window,
    XAxis,
    level_width,
    metrics_report,
    parse_reports,
    read_experiment_series,
    read_series,
)
from registry.metrics._aggregate import (
    AGG_FIELDS,
    SMALL_BATCH_POINTS,
    aggregates_from_arrays,
    bucket_aggregates,
    many_bucket_aggregates,
    merge_all,
    point,
)
from registry.metrics._bulk import bulk_load
from registry.metrics._raw import COPY_MIN_ROWS
from registry.metrics._read import _cover
from registry.models import Experiment, MetricBucket, MetricReport, MetricSeries, Trial
from tests.helpers import DASHBOARD_CONFIG, REPO

# ---------------------------------------------------------------- pure aggregation


def naive_buckets(points: list[tuple[int, float | None]]) -> dict[tuple[int, int], tuple]:
    out: dict[tuple[int, int], list] = {}
    for step, value in sorted(points):
        for level in range(LEVELS):
            out.setdefault((level, step // level_width(level)), []).append(point(step, value))
    return {key: merge_all(aggs) for key, aggs in out.items()}


def test_vectorised_buckets_equal_point_by_point_merges():
    rng = random.Random(3)
    steps = sorted(rng.sample(range(200_000), 5_000))
    points = [(s, None if rng.random() < 0.05 else round(rng.gauss(0, 1), 3)) for s in steps]
    points += [(200_001, 5.0), (200_002, 5.0)]  # a tie: the earlier step is the max
    assert bucket_aggregates(points) == naive_buckets(points)
    other = [(s, float(s % 7)) for s in range(0, 500, 3)]
    # Several series in one pass, each on its own (one starting in the other's last bucket).
    assert many_bucket_aggregates({"a": points, "b": other, "c": []}) == {
        "a": naive_buckets(points),
        "b": naive_buckets(other),
        "c": {},
    }


def test_small_batches_merged_in_python_equal_the_vectorised_buckets():
    """Up to SMALL_BATCH_POINTS points skip numpy; the aggregates are the same either way."""
    rng = random.Random(11)
    for _ in range(300):
        size = rng.randint(1, SMALL_BATCH_POINTS)
        steps = sorted(rng.sample(range(3 * BASE_WIDTH), size))
        # Few distinct values, so ties on the minimum and maximum are common.
        points = [(s, None if rng.random() < 0.2 else float(rng.randint(-2, 2))) for s in steps]
        as_arrays = aggregates_from_arrays(
            np.array(steps, dtype=np.int64),
            np.array([np.nan if v is None else v for _, v in points], dtype=np.float64),
        )
        assert bucket_aggregates(points) == naive_buckets(points) == as_arrays
    halves = {"a": [(1, 1.0), (40, None)], "b": [(2, 3.0)], "c": []}
    assert many_bucket_aggregates(halves) == {k: naive_buckets(v) for k, v in halves.items()}


def test_a_bucket_of_only_gaps_has_no_extremes():
    (agg,) = [a for (level, _), a in bucket_aggregates([(3, None), (4, None)]).items() if not level]
    assert dict(zip(AGG_FIELDS, agg, strict=True)) == {
        "count": 2,
        "first_step": 3,
        "first_value": None,
        "last_step": 4,
        "last_value": None,
        "min_step": None,
        "min_value": None,
        "max_step": None,
        "max_value": None,
        "gap_step": 3,
    }


@pytest.mark.parametrize("seed", range(20))
def test_a_cover_tiles_the_window_exactly(seed):
    rng = random.Random(seed)
    lo = rng.randrange(0, 3_000_000)
    hi = lo + rng.randrange(0, 2_000_000)
    top = rng.randrange(LEVELS)
    runs, raw = _cover(lo, hi, top)
    ranges = [(a, b) for a, b in raw]
    for level, level_runs in runs.items():
        width = level_width(level)
        ranges += [(first * width, (last + 1) * width - 1) for first, last in level_runs]
    ranges.sort()
    assert ranges[0][0] == lo and ranges[-1][1] == hi
    assert all(a[1] + 1 == b[0] for a, b in pairwise(ranges))
    assert all(b - a + 1 < BASE_WIDTH for a, b in raw)
    # Only the top level runs long; finer levels appear at the edges only.
    for level, level_runs in runs.items():
        if level != top:
            assert sum(last - first + 1 for first, last in level_runs) <= 2 * 7


# ---------------------------------------------------------------- with a database


@pytest.fixture
def trial(db, django_user_model):
    owner = django_user_model.objects.create_user("store-owner")
    experiment = Experiment.objects.create(
        owner=owner, name="store", config=DASHBOARD_CONFIG, model_definition=b""
    )
    return Trial.objects.create(experiment=experiment, hparams={})


def report(trial, group, rows, run_id=None):
    body = {
        "reports": [
            {"group": group, "steps_completed": step, "metrics": metrics} for step, metrics in rows
        ]
    }
    return metrics_report(trial_id=trial.id, reports=parse_reports(body), run_id=run_id)


def stored_buckets(trial) -> dict[tuple[str, str, int, int], tuple]:
    rows = MetricBucket.objects.filter(series__trial=trial).values_list(
        "series__group", "series__name", "level", "bucket", *AGG_FIELDS
    )
    return {tuple(r[:4]): tuple(r[4:]) for r in rows}


def expected_buckets(trial) -> dict[tuple[str, str, int, int], tuple]:
    """Every bucket recomputed from scratch from the raw reports."""
    from headway.metric_values import chartable

    points: dict[tuple[str, str], list] = {}
    for group, step, metrics in MetricReport.objects.filter(trial=trial).values_list(
        "group", "steps_completed", "metrics"
    ):
        for name, value in metrics.items():
            points.setdefault((group, name), []).append((step, chartable(value)))
    out = {}
    for (group, name), pts in points.items():
        for (level, bucket), agg in naive_buckets(pts).items():
            out[(group, name, level, bucket)] = agg
    return out


def test_retries_and_restarts_keep_one_point_per_step_and_exact_buckets(trial):
    rng = random.Random(11)
    values = {}
    # Run 1 reports 1..300 in batches of 50 and one batch is retried (its response was lost).
    for first in range(1, 301, 50):
        rows = [(s, {"loss": rng.random(), "acc": rng.random()}) for s in range(first, first + 50)]
        report(trial, "training", rows, run_id=1)
        values.update({s: m for s, m in rows})
    report(trial, "training", [(s, values[s]) for s in range(101, 151)], run_id=1)
    # Run 2 resumes from the checkpoint at step 200: it re-reports 201..260 with new values,
    # and without "acc" at 201..210 (a metric the failed run had there).
    rows = [(s, {"loss": -s / 1000}) for s in range(201, 211)]
    rows += [(s, {"loss": -s / 1000, "acc": 0.5}) for s in range(211, 261)]
    report(trial, "training", rows, run_id=2)
    values.update({s: m for s, m in rows})
    # A NaN and a string value are gaps.
    report(trial, "training", [(400, {"loss": float("nan"), "acc": "n/a"})], run_id=2)

    assert stored_buckets(trial) == expected_buckets(trial)
    (loss,) = read_series(trial_id=trial.id, names=["loss"], max_points=0)
    assert loss["steps"] == [*range(1, 301), 400]
    assert loss["values"][:300] == [values[s]["loss"] for s in range(1, 301)]
    assert loss["values"][-1] is None
    (acc,) = read_series(trial_id=trial.id, names=["acc"], max_points=0)
    assert 205 not in acc["steps"] and acc["count"] == 300 - 10 + 1
    trial.refresh_from_db()
    summary = trial.summary_metrics["training"]
    assert summary["loss"]["count"] == 301
    assert summary["loss"]["last_step"] == 400 and summary["loss"]["last"] is None
    assert summary["loss"]["min"] == pytest.approx(-0.26)
    assert MetricReport.objects.filter(trial=trial).count() == 301


def test_a_metric_that_disappears_on_restart_leaves_no_series(trial):
    # The restarted run (2) supersedes the failed run's (1) report of the step whole.
    report(trial, "validation", [(10, {"validation_accuracy": 0.4, "extra": 1})], run_id=1)
    report(trial, "validation", [(10, {"validation_accuracy": 0.6})], run_id=2)
    assert set(MetricSeries.objects.filter(trial=trial).values_list("name", flat=True)) == {
        "validation_accuracy"
    }
    trial.refresh_from_db()
    assert trial.best_validation == 0.6  # smaller_is_better: False
    assert "extra" not in trial.summary_metrics["validation"]
    assert stored_buckets(trial) == expected_buckets(trial)


def test_two_reports_of_one_step_in_a_batch_keep_the_later(trial):
    assert report(trial, "training", [(5, {"loss": 1.0}), (5, {"loss": 2.0})]) == 2
    (loss,) = read_series(trial_id=trial.id, max_points=0)
    assert (loss["steps"], loss["values"]) == ([5], [2.0])


@pytest.mark.parametrize("size", [2, 150, COPY_MIN_ROWS + 10])
def test_a_step_stored_without_metrics_is_replaced_not_duplicated(trial, size):
    # The summary knows no series at step 5, so the next batch looks append-only: on PostgreSQL
    # one statement below COPY_MIN_ROWS reports, whose upsert replaces the stored row, and COPY
    # from there, which fails on it inside its savepoint and falls back to the upsert.
    assert report(trial, "training", [(5, {})]) == 1
    batch = [(step, {"loss": float(step)}) for step in range(5, 5 + size)]
    assert report(trial, "training", batch) == size
    assert MetricReport.objects.filter(trial=trial).count() == size
    (loss,) = read_series(trial_id=trial.id, max_points=0)
    assert (loss["steps"], loss["values"]) == ([s for s, _ in batch], [m["loss"] for _, m in batch])
    assert stored_buckets(trial) == expected_buckets(trial)
    trial.refresh_from_db()
    assert trial.summary_metrics["training"]["loss"]["count"] == size


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's")
@pytest.mark.parametrize("size", [COPY_MIN_ROWS - 1, COPY_MIN_ROWS])
def test_large_batches_append_raw_rows_with_copy_on_postgresql(trial, size):
    """Below ``COPY_MIN_ROWS`` reports the raw rows join the one statement (an upsert); from
    there they are appended with ``COPY``, which at the SDK's batch sizes (1,000-10,000
    one-metric reports) took 0.65-0.85 of the statement's time (docs/decisions/metrics.md)."""
    statements: list[str] = []

    def record(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    batch = [(step, {"loss": float(step)}) for step in range(1, size + 1)]
    with connection.execute_wrapper(record):
        assert report(trial, "training", batch) == size
    raw_upserts = [sql for sql in statements if 'INSERT INTO "registry_metricreport"' in sql]
    assert len(raw_upserts) == (0 if size >= COPY_MIN_ROWS else 1), statements
    (loss,) = read_series(trial_id=trial.id, max_points=0)
    assert loss["steps"] == [step for step, _ in batch]
    assert MetricReport.objects.filter(trial=trial).count() == size
    assert stored_buckets(trial) == expected_buckets(trial)


SPIKES = {123_457: 100.0, 654_321: -100.0, 876_543: None}
N = 1_000_000


def load_series(trial, n):
    steps = np.arange(n, dtype=np.int64)
    values = np.sin(steps / 5000.0) + 0.01 * np.cos(steps)
    for step, value in SPIKES.items():
        if step < n:
            values[step] = np.nan if value is None else value
    bulk_load(
        trial.id,
        "training",
        steps,
        {"loss": values},
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        steps_per_epoch=1000,
    )
    return trial, values


@pytest.fixture
def million(trial):
    return load_series(trial, N)


@pytest.fixture
def long_series(trial):
    return load_series(trial, 100_000)


WINDOWS = [
    (None, None),
    (100_000, 200_000),
    (123_000, 124_000),
    (123_450, 123_460),
    (600_001, 700_003),
    (654_000, 654_999),
    (876_500, 876_600),
    (0, 999_999),
    (5, 987_654),
]


def test_spikes_first_and_last_survive_every_zoom(million, django_assert_max_num_queries):
    trial, values = million
    for x_min, x_max in WINDOWS:
        window = Window(x_min=x_min, x_max=x_max)
        with django_assert_max_num_queries(6):
            (loss,) = read_series(trial_id=trial.id, max_points=2000, window=window)
        lo, hi = x_min or 0, N - 1 if x_max is None else x_max
        got = dict(zip(loss["steps"], loss["values"], strict=True))
        assert loss["count"] == hi - lo + 1
        assert len(loss["steps"]) <= 2000
        assert loss["steps"] == sorted(loss["steps"])
        assert min(got) == lo and max(got) == hi
        for step in (lo, hi, *got):
            expect = None if math.isnan(values[step]) else float(values[step])
            assert got[step] == pytest.approx(expect) if expect is not None else got[step] is None
        for step, value in SPIKES.items():
            if lo <= step <= hi:
                assert step in got and got[step] == value
        assert loss["downsampled"] == (hi - lo + 1 > 2000)


def test_a_live_poll_reads_only_what_is_new(long_series, django_assert_max_num_queries):
    trial, values = long_series
    n = len(values)
    with django_assert_max_num_queries(4):
        (loss,) = read_series(trial_id=trial.id, window=Window(after_step=n - 11))
    assert loss["steps"] == list(range(n - 10, n))
    assert loss["last_step"] == n - 1 and not loss["downsampled"]
    assert read_series(trial_id=trial.id, window=Window(after_step=n - 1)) == [
        {**loss, "count": 0, "steps": [], "values": []}
    ]


def test_epochs_and_elapsed_time_come_with_the_points(long_series):
    trial, _ = long_series
    (loss,) = read_series(
        trial_id=trial.id, max_points=100, window=Window(x_min=2000), x_axis=XAxis.EPOCHS
    )
    assert loss["epochs"] == [s / 1000 for s in loss["steps"]]
    (loss,) = read_series(trial_id=trial.id, max_points=100, x_axis=XAxis.TIME)
    # No run ever started: time counts from the first report (step 0 at 0.01 s per step).
    assert loss["elapsed_seconds"] == [pytest.approx(s * 0.01) for s in loss["steps"]]


def test_the_overview_query_count_does_not_grow_with_trials(
    trial, django_user_model, django_assert_max_num_queries
):
    experiment = trial.experiment
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def add_trials(n):
        for i in range(n):
            t = Trial.objects.create(experiment=experiment, hparams={"i": i})
            steps = np.arange(0, 5000 + 100 * i, dtype=np.int64)
            bulk_load(
                t.id, "training", steps, {"loss": steps / 1e4, "lr": steps * 0.0}, started_at=start
            )
            report(t, "validation", [(1000, {"validation_accuracy": 0.5 + i / 100})])

    def overview():
        return read_experiment_series(experiment_id=experiment.id, max_points=200)

    add_trials(2)
    with django_assert_max_num_queries(12) as few:
        small = overview()
    add_trials(8)
    with django_assert_max_num_queries(len(few.captured_queries)):
        large = overview()
    assert len(small) == 2 * 3 and len(large) == 10 * 3
    for entry in large:
        if entry["group"] == "training":
            assert entry["downsampled"] and len(entry["steps"]) <= 200
            assert (entry["steps"][0] == 0 and entry["values"][-1] == entry["steps"][-1] / 1e4) or (
                entry["name"] == "lr"
            )
        else:
            assert entry["steps"] == [1000]


def test_progress_falls_back_to_steps_over_max_length(trial):
    report(trial, "training", [(s, {"loss": 1.0}) for s in range(1, 51)])
    trial.refresh_from_db()
    trial.experiment.refresh_from_db()
    assert trial.progress == pytest.approx(0.5)  # max_length: 100 batches
    assert trial.experiment.progress == pytest.approx(0.5)


@pytest.mark.skipif(
    os.environ.get("HEADWAY_STORE_OTHER_DB") == "1", reason="already the other database's run"
)
def test_the_store_behaves_the_same_on_the_other_database(db):
    """Run this module's database tests on the engine this session is not using."""
    env = dict(os.environ, HEADWAY_STORE_OTHER_DB="1")
    if connection.vendor == "postgresql":
        env.pop("DATABASE_URL", None)
    else:
        env["DATABASE_URL"] = os.environ.get(
            "HEADWAY_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"
        )
        import psycopg

        try:
            psycopg.connect(env["DATABASE_URL"], connect_timeout=2).close()
        except psycopg.OperationalError:
            if os.environ.get("CI") == "true":
                raise
            pytest.skip("PostgreSQL is not reachable")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            __file__,
            "-k",
            "not vectorised and not cover and not only_gaps",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout
