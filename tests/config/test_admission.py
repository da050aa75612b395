"""Reads and metric reports wait their turn; heartbeats and other writes pass at once
(config/admission.py)."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import RequestFactory

from config import admission
from tests.helpers import wait_for

FACTORY = RequestFactory()


def test_which_requests_are_reads():
    assert admission.is_read(FACTORY.get("/api/v1/experiments/3/metrics/"))
    assert admission.is_read(FACTORY.get("/experiments/3/"))
    assert admission.is_read(FACTORY.head("/api/v1/trials/4/"))
    for request in (
        FACTORY.post("/api/v1/trials/4/metrics/"),
        FACTORY.post("/api/v1/host-agent/heartbeat/"),
        FACTORY.get("/api/v1/host-agent/runs/5/preempt/"),
        FACTORY.get("/api/v1/trials/4/preempt/"),
        FACTORY.post("/api/v1/unmanaged/trials/4/runs/5/heartbeat/"),
        FACTORY.get("/healthz"),
        FACTORY.get("/api/v1/health/"),
    ):
        assert not admission.is_read(request), request.path


def test_which_requests_are_reports():
    for request in (
        FACTORY.post("/api/v1/trials/4/metrics/"),
        FACTORY.post("/api/2.0/mlflow/runs/log-batch"),
        FACTORY.post("/api/2.0/mlflow/runs/log-metric"),
    ):
        assert admission.is_report(request), request.path
    for request in (
        FACTORY.get("/api/v1/trials/4/metrics/"),
        FACTORY.post("/api/v1/trials/4/checkpoints/"),
        FACTORY.post("/api/v1/trials/4/pause/"),
        FACTORY.post("/api/v1/unmanaged/trials/4/runs/5/heartbeat/"),
        FACTORY.post("/api/v1/host-agent/trials/4/runs/1/logs/"),
        FACTORY.post("/api/2.0/mlflow/runs/log-batch/extra"),
    ):
        assert not admission.is_report(request), request.path


@pytest.mark.parametrize(
    ("setting", "turns", "default", "pool_share"),
    [
        (
            "HEADWAY_WEB_MAX_READS",
            admission.max_reads,
            admission.DEFAULT_MAX_READS,
            lambda size: size - admission.RESERVED_CONNECTIONS,
        ),
        (
            "HEADWAY_WEB_MAX_REPORTS",
            admission.max_reports,
            admission.DEFAULT_MAX_REPORTS,
            # What the reads' turns and the reserved connections leave.
            lambda size: size - admission.RESERVED_CONNECTIONS - admission.DEFAULT_MAX_READS,
        ),
    ],
    ids=["reads", "reports"],
)
def test_turns_from_the_setting_or_what_the_pool_allows(
    settings, monkeypatch, setting, turns, default, pool_share
):
    setattr(settings, setting, 3)
    assert turns() == 3
    setattr(settings, setting, 0)
    with pytest.raises(ImproperlyConfigured, match=setting):
        turns()
    settings.HEADWAY_WEB_MAX_READS = None
    settings.HEADWAY_WEB_MAX_REPORTS = None
    options = settings.DATABASES["default"]
    monkeypatch.setitem(options, "OPTIONS", {"pool": {"max_size": 16}})
    assert turns() == min(default, pool_share(16))
    # 12: the compose file's pool size.
    monkeypatch.setitem(options, "OPTIONS", {"pool": {"max_size": 12}})
    assert turns() == min(default, pool_share(12))
    monkeypatch.setitem(options, "OPTIONS", {"pool": {"max_size": 2}})
    assert turns() == 1
    monkeypatch.setitem(options, "OPTIONS", {})
    assert turns() == default


HEARTBEATS_AND_CONTROLS = [
    FACTORY.post("/api/v1/host-agent/heartbeat/"),
    FACTORY.post("/api/v1/unmanaged/trials/2/runs/1/heartbeat/"),
    FACTORY.post("/api/v1/trials/2/pause/"),
]


@pytest.mark.parametrize(
    ("setting", "held", "busy", "other_kind"),
    [
        (
            "HEADWAY_WEB_MAX_READS",
            FACTORY.get("/slow/"),
            [FACTORY.get("/api/v1/experiments/"), FACTORY.get("/experiments/")],
            FACTORY.post("/api/v1/trials/1/metrics/"),
        ),
        (
            "HEADWAY_WEB_MAX_REPORTS",
            FACTORY.post("/api/v1/trials/1/metrics/"),
            [
                FACTORY.post("/api/v1/trials/2/metrics/"),
                FACTORY.post("/api/2.0/mlflow/runs/log-batch"),
            ],
            FACTORY.get("/api/v1/trials/2/"),
        ),
    ],
    ids=["reads", "reports"],
)
def test_one_over_its_kinds_limit_waits_then_503_while_the_rest_pass(
    settings, monkeypatch, setting, held, busy, other_kind
):
    setattr(settings, setting, 1)
    monkeypatch.setattr(admission, "WAIT_SECONDS", 0.2)
    inside, release = threading.Event(), threading.Event()

    def view(request):
        if request is held:
            inside.set()
            release.wait(30)
        return HttpResponse("ok")

    middleware = admission.AdmissionMiddleware(view)
    holder = threading.Thread(target=middleware, args=(held,))
    holder.start()
    try:
        assert inside.wait(30)
        answers = [middleware(request) for request in busy]
        assert [a.status_code for a in answers] == [503] * len(busy)
        assert answers[0]["Retry-After"] == str(admission.RETRY_AFTER_SECONDS)
        if busy[0].path.startswith("/api/"):
            assert answers[0].headers["Content-Type"] == "application/json"
        # Heartbeats and controls never wait for a turn, nor does the other kind.
        for request in [*HEARTBEATS_AND_CONTROLS, other_kind]:
            assert middleware(request).status_code == 200, request.path
    finally:
        release.set()
        holder.join(30)
    assert middleware(busy[0]).status_code == 200


def test_while_a_report_waits_reads_start_one_at_a_time():
    turns = admission.Turns(reads=2, reports=1)
    assert turns.acquire(admission.REPORT, 1)
    assert turns.acquire(admission.READ, 1)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(turns.acquire(admission.REPORT, 60)))
    waiter.start()
    try:
        wait_for(lambda: turns.waiting(admission.REPORT) == 1, 30, "the second report to wait")
        # A read is running and a report waits: no second read beside it...
        assert not turns.acquire(admission.READ, 0.1)
        turns.release(admission.READ)
        # ...but one read at a time still goes.
        assert turns.acquire(admission.READ, 0.1)
        turns.release(admission.READ)
    finally:
        turns.release(admission.REPORT)
        waiter.join(30)
    assert got == [True]
    # No report waits any more: reads have both their turns again.
    assert turns.acquire(admission.READ, 0.1)
    assert turns.acquire(admission.READ, 0.1)
    assert not turns.acquire(admission.READ, 0.1)
    assert not turns.acquire(admission.REPORT, 0.1)  # the waiter holds the one report turn


def test_a_read_waiting_behind_a_report_starts_once_no_report_waits():
    turns = admission.Turns(reads=2, reports=1)
    assert turns.acquire(admission.REPORT, 1)
    assert turns.acquire(admission.READ, 1)
    waiting_report = threading.Thread(target=lambda: turns.acquire(admission.REPORT, 60))
    waiting_report.start()
    wait_for(lambda: turns.waiting(admission.REPORT) == 1, 30, "the second report to wait")
    got: list[bool] = []
    waiting_read = threading.Thread(target=lambda: got.append(turns.acquire(admission.READ, 60)))
    waiting_read.start()
    wait_for(lambda: turns.waiting(admission.READ) == 1, 30, "the read to wait")
    # The report's turn passes to the waiting report; then no report waits, and the read that
    # waited beside a running read starts (it was woken, not left to time out).
    turns.release(admission.REPORT)
    waiting_report.join(30)
    waiting_read.join(30)
    assert got == [True]
