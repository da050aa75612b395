"""The PostgreSQL one-point report in two round trips: ``BEGIN`` with the trial's lock,
``COMMIT`` with the one statement, run while Django is in autocommit mode.

Only a request outside any transaction takes that path, so these tests commit for real
(``transaction=True``). The summary tests of ``test_metrics_ingest_one_statement`` run here again
through it; the tests below check which batches it takes, that an error or a batch it sends
back leaves no transaction open and loses nothing, and that concurrent reports of one trial
still merge one after the other.
"""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections, connection
from psycopg.pq import TransactionStatus
from rest_framework.test import APIClient

from registry.metrics import _pipelined
from registry.models import MetricReport, Trial
from tests.registry.metrics.test_metrics_ingest_one_statement import (
    _fresh_token_cache,  # noqa: F401 (an autouse fixture of the imported tests)
    one,
    post,
    series_summary,
    test_a_replayed_report_is_stored_once_and_counted_once,  # noqa: F401
    test_a_report_without_metrics_moves_the_step_only,  # noqa: F401
    test_a_series_that_starts_with_gaps_gets_its_first_number,  # noqa: F401
    test_series_loaded_without_a_summary_are_counted_by_the_next_report,  # noqa: F401
    test_the_summary_follows_the_series_through_gaps_text_ties_and_new_names,  # noqa: F401
    test_validation_reports_set_best_validation_in_the_same_request,  # noqa: F401
)
from tests.registry.metrics.test_metrics_merge import (
    stored,
    test_a_batch_of_new_stored_and_changed_steps_keeps_series_exact,  # noqa: F401
    test_a_metric_reported_again_at_a_step_takes_the_later_value,  # noqa: F401
    test_a_report_of_another_run_replaces_the_step_whole,  # noqa: F401
    test_a_retried_batch_changes_nothing,  # noqa: F401
    test_a_second_report_of_a_step_adds_its_metrics,  # noqa: F401
    test_best_validation_follows_the_merged_searcher_metric,  # noqa: F401
    test_two_reports_of_a_step_in_one_batch_from_two_runs_keep_the_later_run,  # noqa: F401
    test_two_reports_of_a_step_in_one_batch_merge,  # noqa: F401
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="PostgreSQL's pipeline mode (SQLite: no path)"
    ),
]


@pytest.fixture
def taken(monkeypatch):
    """What ``_pipelined.report`` answered for each batch it was offered (it still runs)."""
    answers: list[bool] = []
    real = _pipelined.report

    def spy(*args, **kwargs):
        answers.append(real(*args, **kwargs))
        return answers[-1]

    monkeypatch.setattr(_pipelined, "report", spy)
    return answers


def no_open_transaction() -> bool:
    return connection.connection.info.transaction_status == TransactionStatus.IDLE


def test_a_training_report_takes_two_round_trips_and_a_retry_the_transaction(api, trial, taken):
    post(api, trial, one(20, loss=2.0))  # progress 0 -> 1.0 passes a percent: sent back
    post(api, trial, one(21, loss=1.0), one(22, loss=0.5))
    post(api, trial, one(22, loss=0.25))  # replaces a stored step: rolled back, then stored
    post(api, trial, one(23, "validation", **{trial.experiment.searcher_metric: 0.1}))
    assert taken == [False, True, False]  # the validation report was never offered
    assert no_open_transaction()
    trial.refresh_from_db()
    stored = dict(
        MetricReport.objects.filter(trial=trial).values_list("steps_completed", "metrics")
    )
    assert sorted(stored) == [20, 21, 22, 23] and stored[22] == {"loss": 0.25}
    assert trial.summary_metrics["training"]["loss"]["count"] == 3
    assert trial.summary_metrics["training"]["loss"]["min"] == 0.25
    assert trial.summary_metrics == series_summary(trial)
    assert trial.best_validation == 0.1 and trial.steps_completed == 23


def test_reports_of_one_step_merge_in_two_round_trips_or_in_the_transaction(api, trial, taken):
    post(api, trial, one(20, loss=2.0))  # progress reaches 1.0: sent back
    post(api, trial, one(21, loss=1.0), one(21, grad_norm=3.0))  # merged in the batch
    post(api, trial, one(21, train_loss=0.9))  # a stored step: rolled back, merged there
    assert taken == [False, True, False]
    assert no_open_transaction()
    assert stored(trial)[21] == {"loss": 1.0, "grad_norm": 3.0, "train_loss": 0.9}
    trial.refresh_from_db()
    assert trial.summary_metrics == series_summary(trial)
    assert trial.summary_metrics["training"]["loss"]["count"] == 2


def test_progress_passing_a_percent_refreshes_the_experiment(api, trial, taken):
    # A 10-batch trial: each step is 10% of it, so every report passes a whole percent.
    post(api, trial, one(3, loss=1.0))
    assert taken == [False]
    trial.refresh_from_db()
    trial.experiment.refresh_from_db()
    assert trial.progress == pytest.approx(0.3)
    assert trial.experiment.progress == pytest.approx(0.3)
    assert trial.summary_metrics == series_summary(trial)


def test_errors_roll_back_and_leave_the_connection_usable(api, trial, taken, settings):
    settings.HEADWAY_MAX_METRIC_SERIES_PER_TRIAL = 1
    post(api, trial, one(20, loss=1.0))
    over = api.post(
        f"/api/v1/trials/{trial.id}/metrics/",
        {"reports": [one(21, acc=0.5)]},
        format="json",
    )
    assert over.status_code == 400 and "reports" in over.json()["errors"]
    assert no_open_transaction()
    missing = api.post(
        "/api/v1/trials/999999/metrics/", {"reports": [one(1, loss=1.0)]}, format="json"
    )
    assert missing.status_code == 404
    assert no_open_transaction()
    post(api, trial, one(22, loss=0.5))
    assert MetricReport.objects.filter(trial=trial).count() == 2  # the refused step left nothing
    trial.refresh_from_db()
    assert trial.steps_completed == 22
    assert trial.summary_metrics == series_summary(trial)


def test_another_users_trial_is_refused_before_anything_is_written(api, trial, taken):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    bob = get_user_model().objects.create_user("bob", password="bob-password")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=bob).key}")
    answer = client.post(
        f"/api/v1/trials/{trial.id}/metrics/", {"reports": [one(20, loss=1.0)]}, format="json"
    )
    assert answer.status_code in (403, 404)
    assert no_open_transaction()
    assert not MetricReport.objects.filter(trial=trial).exists()


def test_concurrent_reports_of_one_trial_all_count(api, trial, taken):
    post(api, trial, one(20, loss=1.0))  # progress at 1.0: every later report is eligible
    errors: list[BaseException] = []

    def reporter(first: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {api.token}")
        try:
            for step in range(first, first + 40, 2):
                post(client, trial, one(step, loss=float(step), **{f"m{first % 2}": 1.0}))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=reporter, args=(first,)) for first in (21, 22)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert taken.count(True) >= 2
    trial.refresh_from_db()
    assert trial.summary_metrics["training"]["loss"]["count"] == 41
    assert trial.summary_metrics["training"]["loss"]["last_step"] == 60
    assert trial.steps_completed == 60
    assert trial.summary_metrics == series_summary(trial)
    assert Trial.objects.get(id=trial.id).summary_metrics["training"]["m0"]["count"] == 20
