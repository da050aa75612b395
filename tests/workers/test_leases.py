"""Leases: the registry's side on PostgreSQL, the host's with real processes.

A placed run (and each share of one) leases its host's slots; heartbeats renew the lease. While
the master serves other hosts of the namespace, the registry re-queues a run only once its lease
plus the margin passed without a renewal, never counting it as a restart; while it serves none
(its own outage), only after the outage tolerance plus the margin. A host stops the processes of
a lease it could not renew for the outage tolerance itself, and those the master names stale.
Times are set on the rows (or on the lease's clock), never slept through. The host's side talks
to the live server over REST as the ``host_agent`` fixture's host (its runs placed there).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from registry import lifecycle, scheduling
from registry.models import (
    Experiment,
    RunShare,
    RunState,
    State,
    Trial,
    TrialLog,
    TrialRun,
    WorkerHost,
)
from tests.helpers import REPO, TINY_MODEL, process_alive, register_host, reload, wait_for
from workers import config, distributed, leases, supervision

LEASE, MARGIN, GRACE, TOLERANCE = 6.0, 4.0, 3.0, 20.0


@pytest.fixture
def lease_settings(settings):
    """The master's lease timing (Django settings, read by the live server too)."""
    settings.HEADWAY_LEASE_SECONDS = LEASE
    settings.HEADWAY_LEASE_MARGIN_SECONDS = MARGIN
    settings.HEADWAY_KILL_GRACE_SECONDS = GRACE
    settings.HEADWAY_HOST_HEARTBEAT_SECONDS = 1.0
    settings.HEADWAY_HOST_TIMEOUT_SECONDS = 2.0
    settings.HEADWAY_OUTAGE_TOLERANCE_SECONDS = TOLERANCE
    return settings


@pytest.fixture
def agent_lease(monkeypatch):
    """The host agent's lease timing (``workers.config``: as adopted from the master)."""
    monkeypatch.setattr(config.settings, "HEADWAY_LEASE_SECONDS", LEASE)
    monkeypatch.setattr(config.settings, "HEADWAY_KILL_GRACE_SECONDS", GRACE)
    monkeypatch.setattr(config.settings, "HEADWAY_OUTAGE_TOLERANCE_SECONDS", TOLERANCE)


@pytest.fixture
def chief(host_agent, lease_settings):
    """The ``host_agent`` host registered with 2 slots: first in name order ("agent-..."), it
    is the chief of a 4-slot run ganged with a 2-slot host "b"."""
    host_agent.register(2)
    return host_agent


@pytest.fixture
def submit(django_user_model):
    owner = django_user_model.objects.create_user("lease-owner")

    def create(slots: int = 1, max_restarts: int = 0) -> Trial:
        config = {
            "entrypoint": "python train.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 10},
            "resources": {"slots_per_trial": slots},
            "max_restarts": max_restarts,
        }
        experiment = lifecycle.experiment_create(
            owner=owner, config_source=config, model_definition=TINY_MODEL
        )
        return experiment.trials.get()

    return create


def started(trial: Trial) -> TrialRun:
    """Place the trial's queued run, claim it and mark it RUNNING, as its worker would."""
    scheduling.place_queued_runs()
    run = lifecycle.trial_run_claim(trial_id=trial.id, run_id=reload(trial).run_id, worker="w")
    assert run is not None and run.host is not None
    lifecycle.trial_run_running(trial_id=trial.id, run_id=run.run_id)
    return run


def renewed_ago(model, pk: int, seconds: float) -> None:
    model.objects.filter(id=pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def others_beat() -> None:
    """Another host of the namespace (no slots) heartbeats: the master is serving."""
    register_host("others", 0)


# -- the registry ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_is_lost_only_after_its_lease_plus_the_margin(lease_settings, submit):
    register_host("gpu-b", 1)
    trial = submit(max_restarts=0)
    run = started(trial)
    assert scheduling.lease_expiry() == timedelta(seconds=LEASE + MARGIN)
    renewed_ago(TrialRun, run.id, LEASE + MARGIN - 1)  # the host may still be stopping it
    assert lifecycle.reap_lost_runs() == []
    assert reload(run).state == RunState.RUNNING

    renewed_ago(TrialRun, run.id, LEASE + MARGIN + 1)
    renewed_ago(WorkerHost, run.host_id, LEASE + MARGIN + 1)  # the host is gone too
    others_beat()  # ... while the master serves the others
    assert lifecycle.reap_lost_runs() == [(trial.id, 1)]
    assert reload(run).state == RunState.EXITED and run.exit_code is None
    # max_restarts: 0, yet the trial is re-queued: a lost host is not the trial's failure.
    assert reload(trial).state == State.ACTIVE and trial.restarts == 0 and trial.run_id == 2
    expected = (
        f"host gpu-b lost (no lease renewal for {LEASE + MARGIN:g} s): re-queued, not counted "
        "as a restart; waiting for 1 slot"
    )
    assert trial.scheduling_message == expected
    assert TrialLog.objects.filter(trial=trial, message__contains=expected).exists()
    # The next placement pass keeps the note while the run waits, with why it waits.
    scheduling.place_queued_runs()
    message = reload(trial).scheduling_message
    assert message.startswith("host gpu-b lost (no lease renewal")
    assert message.endswith("(1 alive hosts, 0 slots in all)")  # only the others, no slot
    assert lifecycle.reap_lost_runs() == []  # reaped once


@pytest.mark.django_db
def test_the_experiment_says_what_happened(lease_settings, submit, api):
    register_host("gpu-b", 1)
    trial = submit()
    run = started(trial)
    renewed_ago(TrialRun, run.id, LEASE + MARGIN + 1)
    renewed_ago(WorkerHost, run.host_id, LEASE + MARGIN + 1)
    others_beat()
    lifecycle.reap_lost_runs()
    body = api.get(f"/api/v1/experiments/{trial.experiment_id}/").json()
    assert body["scheduling_message"].startswith("host gpu-b lost")
    assert "not counted as a restart" in body["scheduling_message"]


@pytest.mark.django_db
def test_a_host_that_missed_its_renewal_takes_no_new_run(lease_settings, submit):
    late = register_host("a", 1)
    renewed_ago(WorkerHost, late.id, 2.5)  # one renewal missed: well within any lease
    trial = submit()
    assert scheduling.place_queued_runs() == []
    assert TrialRun.objects.get(trial=trial).host is None
    register_host("a", 1)  # it renewed: placeable again
    assert scheduling.place_queued_runs() == [(trial.id, 1)]


def chief_spec(chief, run: TrialRun):
    """The run's launch spec as its chief's host (the agent) fetches it over REST."""
    assert run.host is not None and run.host.name == chief.name
    return chief.api.run_spec(run.trial_id, run.run_id)


def test_a_lapsed_share_ends_as_lost_and_its_chief_stops_without_a_restart(chief, submit):
    b = register_host("b", 2)
    trial = submit(slots=4, max_restarts=0)
    run = started(trial)
    spec = chief_spec(chief, run)
    share = RunShare.objects.get(run=run)
    RunShare.objects.filter(id=share.id).update(state=RunState.RUNNING)
    renewed_ago(RunShare, share.id, LEASE + MARGIN - 1)
    assert distributed.ShareWatch(spec).check() is None  # may still be stopping its ranks
    lifecycle.reap_lost_runs()
    assert reload(share).state == RunState.RUNNING

    renewed_ago(RunShare, share.id, LEASE + MARGIN + 1)
    # The host is gone too: the re-queued run (placed on commit, the test's writes commit) waits.
    renewed_ago(WorkerHost, b.id, LEASE + MARGIN + 1)
    watch = distributed.ShareWatch(spec)
    assert "host b lost" in watch.check()
    assert lifecycle.reap_lost_runs() == []  # the chief's lease is fresh: only the share ends
    assert reload(share).state == RunState.EXITED and share.exit_code is None
    assert TrialLog.objects.filter(trial=trial, message__contains="host b lost").exists()
    # The chief's ranks failed as their peers vanished: lost, not the trial's failure.
    assert watch.final_exit_code(1, lambda line: None) is None
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=None, reason="host b lost")
    assert reload(trial).state == State.ACTIVE and trial.restarts == 0
    assert trial.scheduling_message.startswith("host b lost: re-queued, not counted")
    assert Experiment.objects.get(id=trial.experiment_id).state == State.ACTIVE


def test_a_chief_failing_alone_still_counts(chief, submit):
    register_host("b", 2)
    trial = submit(slots=4)
    spec = chief_spec(chief, started(trial))
    RunShare.objects.filter(run__trial=trial).update(state=RunState.EXITED, exit_code=-15)
    assert distributed.ShareWatch(spec).final_exit_code(1, lambda line: None) == 1


def test_a_share_whose_host_is_gone_stops_the_chief_without_the_rendezvous_timeout(
    chief, submit, monkeypatch
):
    monkeypatch.setattr(config.settings, "HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS", 300.0)
    b = register_host("b", 2)
    trial = submit(slots=4)
    spec = chief_spec(chief, started(trial))
    assert distributed.ShareWatch(spec).check() is None  # queued, its host renewing
    renewed_ago(WorkerHost, b.id, LEASE + 1)
    line = distributed.ShareWatch(spec).check()
    assert line is not None and "host b lost: node 1 (host b) cannot start" in line


@pytest.mark.django_db
def test_an_exited_run_leaves_no_queued_share(lease_settings, submit):
    register_host("a", 2)
    register_host("b", 2)
    trial = submit(slots=4)
    run = started(trial)
    assert RunShare.objects.get(run=run).state == RunState.QUEUED
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=None, reason="host a lost")
    assert not RunShare.objects.filter(state__in=["QUEUED", "STARTING", "RUNNING"]).exists()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"HEADWAY_HOST_HEARTBEAT_SECONDS": "10", "HEADWAY_LEASE_SECONDS": "15"}, "LEASE"),
        ({"HEADWAY_KILL_GRACE_SECONDS": "10", "HEADWAY_LEASE_MARGIN_SECONDS": "5"}, "LEASE_MARGIN"),
        ({"HEADWAY_HOST_TIMEOUT_SECONDS": "60"}, "HOST_TIMEOUT"),
        ({"HEADWAY_HOST_HEARTBEAT_SECONDS": "0"}, "HOST_HEARTBEAT"),
        ({"HEADWAY_OUTAGE_TOLERANCE_SECONDS": "5"}, "OUTAGE_TOLERANCE"),
    ],
)
def test_lease_settings_that_cannot_hold_are_refused(env, named):
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert f"HEADWAY_{named}_SECONDS" in result.stderr.splitlines()[-1]


def test_the_default_timings_keep_every_promise():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.HEADWAY_HOST_HEARTBEAT_SECONDS, s.HEADWAY_HOST_TIMEOUT_SECONDS, "
        "s.HEADWAY_LEASE_SECONDS, s.HEADWAY_LEASE_MARGIN_SECONDS, s.HEADWAY_KILL_GRACE_SECONDS)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    beat, host_timeout, lease, margin, grace = map(float, result.stdout.split())
    assert beat < host_timeout < 2 * beat  # one missed renewal: no longer placeable
    assert lease >= 2 * beat  # one missed renewal: its trials keep running
    assert margin > grace  # its ranks are gone before the registry re-places the run


# -- the host -------------------------------------------------------------------------------------

STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print("ready", child.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def stubborn():
    """A process group that ignores SIGTERM (a parent and its child); killed at teardown."""
    process = subprocess.Popen(
        [sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    words = process.stdout.readline().split()
    assert words[:1] == ["ready"]
    yield process, int(words[1])
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    process.stdout.close()


def test_a_host_that_cannot_renew_stops_the_run_itself_after_the_outage_tolerance(
    agent_lease, stubborn, caplog
):
    process, child = stubborn
    lines: list[str] = []
    lease = leases.hold(leases.RUN, 7, 3, 0, claimed=time.monotonic())
    try:
        leases.attach(lease, supervision.ProcessGroupKiller(process, grace=0.5), lines.append)
        assert leases.check() == []  # renewed just now
        assert process.poll() is None
        # The master unreachable for a lease: an outage of the master is ridden out.
        lease.renewed -= LEASE
        assert leases.check() == []
        assert process.poll() is None and not lease.expired
        # ... until the outage tolerance passed since the last renewal started.
        lease.renewed -= TOLERANCE - LEASE
        with caplog.at_level(logging.ERROR, logger="headway.worker"):
            assert leases.check() == [lease]
        assert "could not renew the lease of trial 7 run 3" in caplog.text
        assert "could not renew the lease of trial 7 run 3" in lines[0]
        assert lines[1] == "[headway] SIGTERM to the trial's process group"
        lease.renewed_at(time.monotonic())  # a late renewal cannot revive an expired lease
        assert lease.expired
        # Both ignore SIGTERM: SIGKILL follows the grace period, sent by the watchdog alone.
        wait_for(lambda: leases.check() is not None and lease.killer.killed, 30, "SIGKILL")
        assert process.wait(timeout=30) == -signal.SIGKILL
        wait_for(lambda: not process_alive(child), 30, "the child to die")
        assert lines[-1].endswith("after SIGTERM: SIGKILL")
    finally:
        leases.release(lease)
    assert lease not in leases.held()


def test_renewing_moves_only_held_leases_and_times_them_from_their_start(
    host_agent, lease_settings, submit
):
    host_agent.register(1)
    trial = submit()
    run = started(trial)
    assert run.host.name == host_agent.name
    renewed_ago(TrialRun, run.id, 5)
    started_at = timezone.now()

    def send(runs, shares):  # the host's heartbeat (workers.hosts), over REST
        return host_agent.api.host_heartbeat(
            pool=config.settings.HEADWAY_RESOURCE_POOL,
            devices=["cpu0"],
            gpu=False,
            started_at=started_at,
            runs=runs,
            shares=shares,
        )

    before = time.monotonic()
    lease = leases.hold(leases.RUN, trial.id, 1, 0, claimed=before - 5)
    try:
        assert leases.renew(send).renewed == 1
        assert before <= lease.renewed <= time.monotonic()
        assert timezone.now() - reload(run).heartbeat_at < timedelta(seconds=5)
    finally:
        leases.release(lease)
    renewed_ago(TrialRun, run.id, 5)
    assert leases.renew(send).renewed == 0  # released: no longer renewed by this host
    assert timezone.now() - reload(run).heartbeat_at >= timedelta(seconds=5)


def test_the_guard_stops_a_run_whose_lease_ended_when_its_worker_did_not(tmp_path):
    from tests.workers.test_faults_worker_death import _group_members

    lease_file = tmp_path / "lease"
    lease_file.write_text(f"{time.monotonic() + 3600:.3f}\n")
    ignores_sigterm = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(600)"
    )
    guard = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "headway.exec.guard",
            "--parent",
            str(os.getpid()),
            "--grace",
            "0.5",
            "--interval",
            "0.1",
            "--lease-file",
            str(lease_file),
            "--",
            sys.executable,
            "-c",
            ignores_sigterm,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert guard.stdout.readline().strip() == "ready"
        assert len(_group_members(guard.pid)) == 2  # its worker (this process) lives, lease too
        # The worker froze: no renewal moves the lease's end any more, and it passes.
        lease_file.write_text(f"{time.monotonic() - 1:.3f}\n")
        wait_for(lambda: not _group_members(guard.pid), 30, "the group to be stopped")
        assert "the run's lease expired" in guard.stderr.read()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(guard.pid, signal.SIGKILL)
        guard.wait()


def test_a_published_lease_moves_with_each_renewal(agent_lease, tmp_path):
    from headway.exec.guard import lease_end

    lease = leases.hold(leases.RUN, 7, 4, 0, claimed=time.monotonic() - 2)
    try:
        lease.publish(tmp_path / "lease")
        first = lease_end(str(tmp_path / "lease"))
        assert first == pytest.approx(lease.renewed + TOLERANCE, abs=0.01)
        lease.renewed_at(time.monotonic())
        assert lease_end(str(tmp_path / "lease")) > first
    finally:
        leases.release(lease)
