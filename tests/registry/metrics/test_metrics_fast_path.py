"""The one-report fast path: few statements, cached token lookups, revocation within a bound.

Counts statements (``CaptureQueriesContext``), never times. The token cache's clock is advanced
by replacing ``time`` in ``registry.api.authentication`` with a settable clock, so the
revocation bound is checked without sleeping.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry.api import authentication
from registry.models import MetricReport, RunState, TrialRun
from tests.helpers import start_run

pytestmark = pytest.mark.django_db


class Clock:
    """A ``time`` stand-in for the token cache: ``monotonic()`` is real time plus ``skew``."""

    def __init__(self) -> None:
        self.skew = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skew

    def pass_bound(self) -> None:
        """Move past the cache's lifetime (the revocation bound)."""
        self.skew += authentication.TOKEN_CACHE_SECONDS + 0.001


@pytest.fixture
def clock(monkeypatch):
    authentication.clear_token_cache()
    fake = Clock()
    monkeypatch.setattr(authentication, "time", fake)
    yield fake
    authentication.clear_token_cache()


def report(step: int) -> dict:
    return {"reports": [{"group": "training", "steps_completed": step, "metrics": {"loss": 0.5}}]}


def client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.mark.parametrize("token", ["user", "run"])
def test_one_report_is_one_transaction_of_few_statements(api, trial, clock, token):
    client = client_for(start_run(trial).token) if token == "run" else api
    path = f"/api/v1/trials/{trial.id}/metrics/"
    # Step 20 of a 10-batch trial: progress reaches 1.0 here, so later reports skip it.
    assert client.post(path, report(20), format="json").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        response = client.post(path, report(21), format="json")
    assert response.status_code == 200, response.content
    statements = [q["sql"] for q in queries.captured_queries]
    # Token cached, access checked on the locked trial row: no statement before the transaction.
    assert not any("authtoken" in sql or "registry_trialrun" in sql for sql in statements)
    # Lock the trial, then on SQLite raw report, series, buckets (one executemany), summary; on
    # PostgreSQL raw report, series and buckets are one statement. Plus BEGIN and COMMIT (a
    # savepoint and its release inside the test's transaction).
    control = ("SAVEPOINT", "RELEASE SAVEPOINT", "BEGIN", "COMMIT")
    work = [sql for sql in statements if not sql.startswith(control)]
    assert len(work) <= (3 if connection.vendor == "postgresql" else 5), statements
    stored = MetricReport.objects.filter(trial=trial).values_list("steps_completed", flat=True)
    assert sorted(stored) == [20, 21]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
def test_a_reports_statements_are_prepared_on_postgresql(api, trial, clock):
    """The trial's locked read and the one write are prepared on the connection after a few
    reports (parsing and planning the 8 kB write was half its time); while queries are
    captured they run unprepared, so the capture holds their SQL."""
    path = f"/api/v1/trials/{trial.id}/metrics/"
    for step in range(1, 8):
        assert api.post(path, report(step), format="json").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert api.post(path, report(8), format="json").status_code == 200
    assert any(q["sql"].startswith("WITH s AS") for q in queries.captured_queries)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] or "" for row in cursor.fetchall()]
    assert any("FOR NO KEY UPDATE OF t" in sql for sql in prepared), prepared
    assert any(sql.startswith("WITH s AS (INSERT INTO") for sql in prepared), prepared
    summary = api.get(f"/api/v1/trials/{trial.id}/").json()["summary_metrics"]
    assert summary["training"]["loss"]["count"] == 8
    assert summary["training"]["loss"]["last_step"] == 8


def test_another_owners_user_token_is_refused_and_writes_nothing(trial, django_user_model, clock):
    bob = django_user_model.objects.create_user("bob")
    response = client_for(Token.objects.create(user=bob).key).post(
        f"/api/v1/trials/{trial.id}/metrics/", report(1), format="json"
    )
    assert response.status_code == 403
    assert not MetricReport.objects.filter(trial=trial).exists()


def test_an_unknown_trial_is_a_404(api, clock):
    response = api.post("/api/v1/trials/999999/metrics/", report(1), format="json")
    assert response.status_code == 404


def test_an_ended_runs_token_is_refused_within_the_bound(trial, clock):
    run = start_run(trial)
    client = client_for(run.token)
    path = f"/api/v1/trials/{trial.id}/metrics/"
    assert client.post(path, report(1), format="json").status_code == 200
    # Another process ends the run (no signal reaches this one's cache).
    TrialRun.objects.filter(id=run.id).update(state=RunState.EXITED)
    clock.pass_bound()
    assert client.post(path, report(2), format="json").status_code == 401
    assert not MetricReport.objects.filter(trial=trial, steps_completed=2).exists()


def test_a_token_deleted_elsewhere_is_refused_within_the_bound(api, trial, clock):
    path = f"/api/v1/trials/{trial.id}/"
    assert api.get(path).status_code == 200
    with connection.cursor() as cursor:  # as another server process would: no signal here
        cursor.execute("DELETE FROM authtoken_token WHERE key = %s", [api.token])
    clock.pass_bound()
    assert api.get(path).status_code == 401


def test_a_token_deleted_in_this_process_is_refused_at_once(api, trial, clock):
    path = f"/api/v1/trials/{trial.id}/"
    assert api.get(path).status_code == 200
    Token.objects.get(key=api.token).delete()
    assert api.get(path).status_code == 401


def test_a_deactivated_user_is_refused_within_the_bound(api, trial, user, clock):
    path = f"/api/v1/trials/{trial.id}/"
    assert api.get(path).status_code == 200
    type(user).objects.filter(id=user.id).update(is_active=False)
    clock.pass_bound()
    assert api.get(path).status_code == 401


def test_changes_saved_in_this_process_apply_at_once(api, trial, user, clock):
    from registry import lifecycle

    run = start_run(trial)
    client = client_for(run.token)
    path = f"/api/v1/trials/{trial.id}/"
    assert client.get(path).status_code == 200 and api.get(path).status_code == 200
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=1)
    assert client.get(path).status_code == 401  # the run's save dropped its key
    user.is_active = False
    user.save()
    assert api.get(path).status_code == 401  # the user's save dropped its keys


def test_a_new_token_works_at_once_and_the_cache_stays_bounded(
    api, trial, django_user_model, clock, monkeypatch
):
    monkeypatch.setattr(authentication, "TOKEN_CACHE_MAX_KEYS", 3)
    path = f"/api/v1/trials/{trial.id}/"
    for i in range(5):
        someone = django_user_model.objects.create_user(f"user{i}")
        key = Token.objects.create(user=someone).key
        assert client_for(key).get(path).status_code != 401
        assert len(authentication._cache) <= 3
    assert api.get(path).status_code == 200


# ---------------------------------------------------------------- zoom reads use the whole index


def _plans(statements: list[str]) -> list[str]:
    """SQLite's ``EXPLAIN QUERY PLAN`` detail lines of each captured SELECT."""
    details: list[str] = []
    with connection.cursor() as cursor:
        for sql in statements:
            if sql.lstrip().upper().startswith("SELECT"):
                cursor.execute("EXPLAIN QUERY PLAN " + sql)
                details.extend(row[-1] for row in cursor.fetchall())
    return details


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's query plan text")
def test_a_zoom_seeks_bucket_and_report_ranges_instead_of_reading_the_series(trial):
    """Each bucket and raw-edge read of a zoom window is an index range seek, so its cost
    follows the points returned, not the points stored (it was 9.4 ms at 1M, 62.5 ms at 10M)."""
    from datetime import UTC, datetime

    import numpy as np

    from registry.metrics import Window, read_series
    from registry.metrics._bulk import bulk_load

    steps = np.arange(20_000, dtype=np.int64)
    bulk_load(
        trial.id, "training", steps, {"loss": np.sin(steps / 500.0)}, started_at=datetime.now(UTC)
    )
    with CaptureQueriesContext(connection) as queries:
        (loss,) = read_series(
            trial_id=trial.id, max_points=200, window=Window(x_min=5_003, x_max=9_017)
        )
    assert loss["steps"][0] == 5_003 and loss["steps"][-1] == 9_017
    details = _plans([q["sql"] for q in queries.captured_queries])
    bucket_reads = [d for d in details if "registry_metricbucket" in d]
    report_reads = [d for d in details if "registry_metricreport" in d]
    assert bucket_reads and report_reads, details
    assert all("bucket>" in d for d in bucket_reads), bucket_reads
    assert all("steps_completed>" in d for d in report_reads), report_reads
