"""An outage of the master seen from a host (``workers.outage``): a failing call is recorded
and retried, not raised; a bug or a refusal is raised."""

from __future__ import annotations

import pytest
import requests

from headway.client import APIError, BadRequestError
from workers.outage import MasterOutage, retry_master


def _down():
    raise APIError("POST host-agent/heartbeat/: HTTP 503: database unavailable", status=503)


def test_a_failing_call_is_recorded_and_the_budget_exceeded():
    outage = MasterOutage(budget=0.0)
    assert outage.attempt(_down) is False
    assert outage.exceeded and "database unavailable" in outage.last_error


def test_a_bug_or_a_refused_request_is_raised():
    with pytest.raises(ZeroDivisionError):
        MasterOutage(budget=60).attempt(lambda: 1 / 0)

    def refused():
        raise BadRequestError("pool: unknown", status=400)

    with pytest.raises(BadRequestError):
        MasterOutage(budget=60).attempt(refused)


def test_a_call_that_succeeds_clears_the_outage():
    healthy = MasterOutage(budget=60)
    assert healthy.attempt(lambda: None) is True and not healthy.exceeded


def test_retry_master_returns_once_the_master_answers_again():
    answers = iter([requests.ConnectionError("connection refused"), "ok"])

    def flaky():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retry_master(flaky, budget=30, what="test") == "ok"
    with pytest.raises(APIError):
        retry_master(_down, budget=0, what="test")
