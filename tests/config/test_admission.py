"""Reads wait their turn; heartbeats and writes pass at once (config/admission.py)."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import RequestFactory

from config import admission

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


def test_max_reads_from_the_setting_or_the_pool(settings, monkeypatch):
    settings.HEADWAY_WEB_MAX_READS = 3
    assert admission.max_reads() == 3
    settings.HEADWAY_WEB_MAX_READS = 0
    with pytest.raises(ImproperlyConfigured, match="HEADWAY_WEB_MAX_READS"):
        admission.max_reads()
    settings.HEADWAY_WEB_MAX_READS = None
    default = settings.DATABASES["default"]
    monkeypatch.setitem(default, "OPTIONS", {"pool": {"max_size": 16}})
    assert admission.max_reads() == admission.DEFAULT_MAX_READS
    monkeypatch.setitem(default, "OPTIONS", {"pool": {"max_size": 6}})
    assert admission.max_reads() == 6 - admission.RESERVED_CONNECTIONS
    monkeypatch.setitem(default, "OPTIONS", {"pool": {"max_size": 2}})
    assert admission.max_reads() == 1
    monkeypatch.setitem(default, "OPTIONS", {})
    assert admission.max_reads() == admission.DEFAULT_MAX_READS


def test_a_read_over_the_limit_waits_then_503_while_writes_pass(settings, monkeypatch):
    settings.HEADWAY_WEB_MAX_READS = 1
    monkeypatch.setattr(admission, "WAIT_SECONDS", 0.2)
    inside, release = threading.Event(), threading.Event()

    def view(request):
        if request.path == "/slow/":
            inside.set()
            release.wait(30)
        return HttpResponse("ok")

    middleware = admission.ReadAdmissionMiddleware(view)
    holder = threading.Thread(target=middleware, args=(FACTORY.get("/slow/"),))
    holder.start()
    try:
        assert inside.wait(30)
        busy = middleware(FACTORY.get("/api/v1/experiments/"))
        assert busy.status_code == 503
        assert busy["Retry-After"] == str(admission.RETRY_AFTER_SECONDS)
        assert busy.headers["Content-Type"] == "application/json"
        assert middleware(FACTORY.get("/experiments/")).status_code == 503
        # Heartbeats and writes never wait for a read's turn.
        assert middleware(FACTORY.post("/api/v1/host-agent/heartbeat/")).status_code == 200
        assert middleware(FACTORY.post("/api/v1/trials/1/metrics/")).status_code == 200
    finally:
        release.set()
        holder.join(30)
    assert middleware(FACTORY.get("/api/v1/experiments/")).status_code == 200
