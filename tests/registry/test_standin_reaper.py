"""While the master worker is silent, the web server serving host heartbeats runs its lost-run
reaper pass (``registry.lifecycle._standin``): a dead host's run is found lost although no
Celery worker runs; while the worker beats, a heartbeat reaps nothing itself."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry import scheduling
from registry.health import master_worker_limit, record_beat
from registry.lifecycle import _standin
from registry.models import ComponentBeat, Trial, TrialRun, WorkerHost
from tests.helpers import create_experiment, register_host, reload, start_run
from tests.host_api_helpers import beat, host_api

pytestmark = [pytest.mark.integration]


@pytest.fixture
def dead_host_run(api, transactional_db, monkeypatch) -> TrialRun:
    """A RUNNING run on host ``dead``, whose host and lease stopped renewing an hour ago, while
    host ``alive`` heartbeats (the master serves the namespace: not its own outage)."""
    monkeypatch.setattr(_standin, "_next_check", 0.0)
    register_host("dead", 1)
    trial = Trial.objects.get(experiment_id=create_experiment(api).json()["id"])
    scheduling.place_queued_runs()
    run = start_run(trial)
    long_ago = timezone.now() - timedelta(hours=1)
    TrialRun.objects.filter(pk=run.pk).update(heartbeat_at=long_ago)
    WorkerHost.objects.filter(name="dead").update(heartbeat_at=long_ago)
    register_host("alive", 0)
    return run


def test_a_silent_master_worker_is_stood_in_for_by_a_heartbeat(dead_host_run, live_server):
    stale = timezone.now() - timedelta(seconds=master_worker_limit() + 5)
    record_beat(at=stale)
    beat(host_api(live_server, "alive"), "alive")  # the registration beat runs the pass
    run = reload(dead_host_run)
    assert run.state == "EXITED" and run.exit_code is None  # lost
    trial = reload(run.trial)
    assert trial.run_id == 2 and trial.restarts == 0  # re-queued, not charged
    assert ComponentBeat.objects.get(name=_standin.STANDIN).beat_at > stale
    assert ComponentBeat.objects.get(name="master_worker").beat_at == stale  # still reported down


def test_one_web_process_stands_in_per_reaper_interval(dead_host_run, live_server, monkeypatch):
    ComponentBeat.objects.create(name=_standin.STANDIN, beat_at=timezone.now())  # a turn just now
    beat(host_api(live_server, "alive"), "alive")
    assert reload(dead_host_run).state == "RUNNING"  # another process's turn: not twice


@pytest.mark.parametrize("worker_beat", ["now", "never"])
def test_a_beating_or_not_yet_started_master_worker_is_left_its_work(
    dead_host_run, live_server, worker_beat
):
    if worker_beat == "now":
        record_beat()
    beat(host_api(live_server, "alive"), "alive")
    assert reload(dead_host_run).state == "RUNNING"
    assert not ComponentBeat.objects.filter(name=_standin.STANDIN).exists()
