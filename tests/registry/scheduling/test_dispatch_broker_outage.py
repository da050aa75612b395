"""A broker (Redis) outage at dispatch: the write commits, the request answers as usual, and the
run's task is sent by the re-dispatch once the broker is back (``registry.scheduling``).

A real, private Redis (``tests.helpers_redis``) is stopped under the master's Celery app:
``send_task`` fails as it does in production (kombu's ``OperationalError`` after its retries).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from registry import scheduling
from registry.models import Experiment, RunState, TrialRun
from registry.scheduling import _dispatch
from tests.helpers import TINY_CONFIG, create_experiment, register_host
from tests.helpers_redis import PrivateRedis, master_broker, unanswered_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_skipping(monkeypatch):
    """Every send tries the broker (the skip after a failure has a test of its own)."""
    monkeypatch.setattr(_dispatch, "SKIP_AFTER_FAILURE_SECONDS", 0.0)
    monkeypatch.setattr(_dispatch, "_skip_until", 0.0)


def _queued_messages(url: str, queue: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return int(client.llen(queue))
    finally:
        client.close()


def test_submission_during_a_broker_outage_answers_201_and_its_run_is_sent_once_the_broker_is_back(
    api, tmp_path, caplog
):
    with PrivateRedis(tmp_path) as broker, master_broker(broker.url()):
        host = register_host("outage-host", 1)
        broker.stop()
        response = create_experiment(api)
        assert response.status_code == 201, response.content
        # Stored once, placed; its task could not be sent, which the log says.
        assert Experiment.objects.count() == 1
        run = TrialRun.objects.get()
        assert (run.state, run.host_id) == (RunState.QUEUED, host.id)
        assert "could not be sent" in caplog.text

        broker.start()
        # The reaper's pass (run by the master's worker) sends it again past the dispatch timeout.
        assert scheduling.redispatch_unclaimed_runs(timeout=timedelta(0)) == [
            (run.trial_id, run.run_id)
        ]
        assert _queued_messages(broker.url(), host.queue) == 1


def test_redispatch_during_a_broker_outage_is_logged_and_tried_again_on_the_next_pass(
    api, tmp_path, caplog
):
    with PrivateRedis(tmp_path) as broker, master_broker(broker.url()):
        host = register_host("outage-host", 1)
        broker.stop()
        assert create_experiment(api).status_code == 201
        run = TrialRun.objects.get()
        # No pass raises while the broker is away, and none counts the run as sent.
        assert scheduling.redispatch_unclaimed_runs(timeout=timedelta(0)) == []
        broker.start()
        assert scheduling.redispatch_unclaimed_runs(timeout=timedelta(0)) == [
            (run.trial_id, run.run_id)
        ]
        assert _queued_messages(broker.url(), host.queue) == 1


def test_after_a_failed_send_the_sends_of_the_next_seconds_are_skipped(
    api, tmp_path, caplog, monkeypatch
):
    """A grid search placed during an outage waits out kombu's retries once, not per trial."""
    monkeypatch.setattr(_dispatch, "SKIP_AFTER_FAILURE_SECONDS", 3600.0)
    grid = TINY_CONFIG.replace(
        "lr: {type: log, minval: -3, maxval: -1}", "lr: {type: categorical, vals: [0.1, 0.2, 0.3]}"
    ).replace("name: single,", "name: grid,")
    with PrivateRedis(tmp_path) as broker, master_broker(broker.url()):
        register_host("outage-host", 3)
        broker.stop()
        assert create_experiment(api, config=grid).status_code == 201
        assert TrialRun.objects.filter(state=RunState.QUEUED, host__isnull=False).count() == 3
        assert caplog.text.count("could not be sent") == 1
        assert caplog.text.count("the broker failed just now") == 2


def test_a_broker_host_that_does_not_answer_costs_a_bounded_wait_not_a_hung_request(api, caplog):
    """Connection attempts to a host that is down time out (``workers.broker``'s connect
    timeout) instead of waiting for the kernel's, once per publish retry."""
    with unanswered_port() as port, master_broker(f"redis://127.0.0.1:{port}/0"):
        register_host("outage-host", 1)
        assert create_experiment(api).status_code == 201
        assert "could not be sent" in caplog.text
        assert Experiment.objects.count() == 1
