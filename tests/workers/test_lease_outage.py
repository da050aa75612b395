"""Leases through an outage of the master, and the fencing of a host that was cut off.

The master's own outage (no host of a namespace served) is not counted against a lease: nothing
is lost before the outage tolerance plus the margin, and the first heartbeat it serves again
renews every lease of the namespace. A host cut off while the master served others loses its run
after the lease plus the margin; back in touch, its heartbeat is told which of its runs are
stale, it is not placeable while it lists them, and the stale run's token writes nothing. Times
are set on the rows (or on the lease's clock), never slept through.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import requests
from django.utils import timezone

from registry import lifecycle, scheduling
from registry.lifecycle import host_agent as agent
from registry.models import RunState, TrialRun, WorkerHost
from registry.pools import DEFAULT_POOL
from tests.helpers import register_host, reload, wait_for
from tests.workers.test_leases import (  # noqa: F401 (fixtures)
    LEASE,
    MARGIN,
    TOLERANCE,
    agent_lease,
    lease_settings,
    others_beat,
    renewed_ago,
    started,
    stubborn,
    submit,
)
from workers import leases, supervision


def beat(host: str, runs: list[tuple[int, int]] = ()) -> None:
    """Host ``host`` (1 CPU slot) heartbeats through the master's code, listing ``runs``."""
    agent.host_beat(
        host,
        pool=DEFAULT_POOL,
        devices=["cpu0"],
        gpu=False,
        started_at=timezone.now(),
        runs=[{"trial_id": t, "run_id": r} for t, r in runs],
    )


def silent_for(seconds: float, *runs: TrialRun) -> None:
    """Every host and the given runs renewed nothing for ``seconds``."""
    for run in runs:
        renewed_ago(TrialRun, run.id, seconds)
    for pk in WorkerHost.objects.values_list("id", flat=True):
        renewed_ago(WorkerHost, pk, seconds)


@pytest.mark.django_db
@pytest.mark.usefixtures("lease_settings")
def test_while_no_host_is_served_a_lease_lapses_only_after_the_outage_tolerance(
    submit,  # noqa: F811 - the imported fixture
):
    register_host("gpu-b", 1)
    trial = submit()
    run = started(trial)
    silent_for(LEASE + MARGIN + 1, run)  # the web tier was down: no host could renew
    assert not scheduling.serving(run.namespace)
    assert lifecycle.reap_lost_runs() == []
    assert reload(run).state == RunState.RUNNING

    # By the tolerance the host stopped the run itself, whatever kept it from the master.
    silent_for(TOLERANCE + MARGIN + 1, run)
    assert lifecycle.reap_lost_runs() == [(trial.id, 1)]
    expected = f"host gpu-b lost (no lease renewal for {TOLERANCE + MARGIN:g} s)"
    assert reload(trial).scheduling_message.startswith(expected)
    assert trial.restarts == 0 and trial.run_id == 2


@pytest.mark.django_db
@pytest.mark.usefixtures("lease_settings")
def test_the_first_heartbeat_after_the_masters_outage_renews_every_lease(
    submit,  # noqa: F811 - the imported fixture
):
    register_host("a", 1)
    register_host("b", 1)
    first, second = submit(), submit()
    runs = [started(first), started(second)]
    assert {run.host.name for run in runs} == {"a", "b"}
    silent_for(LEASE + MARGIN + 1, *runs)
    resumed = timezone.now()
    beat("a")  # the master serves again; b's beat is due a moment later
    for run in runs:
        assert reload(run).heartbeat_at >= resumed  # a fresh grace from the resumption
    assert lifecycle.reap_lost_runs() == []

    # b never comes back while a keeps beating: b's run is lost after a lease plus the margin.
    on_b = next(run for run in runs if run.host.name == "b")
    on_a = next(run for run in runs if run.host.name == "a")
    renewed_ago(TrialRun, on_b.id, LEASE + MARGIN + 1)
    renewed_ago(WorkerHost, on_b.host_id, LEASE + MARGIN + 1)
    beat("a", [(on_a.trial_id, on_a.run_id)])
    assert scheduling.serving(on_b.namespace)
    assert lifecycle.reap_lost_runs() == [(on_b.trial_id, 1)]
    assert reload(on_a).state == RunState.RUNNING


@pytest.mark.usefixtures("lease_settings")
def test_a_host_back_from_a_partition_is_told_its_run_is_stale_and_is_fenced(
    host_agent,
    submit,  # noqa: F811 - the imported fixture
):
    host_agent.register(1)
    trial = submit()
    run = started(trial)
    assert run.host.name == host_agent.name
    # Cut off for a lease plus the margin while the master served the others: lost, re-queued.
    renewed_ago(TrialRun, run.id, LEASE + MARGIN + 1)
    renewed_ago(WorkerHost, run.host_id, LEASE + MARGIN + 1)
    others_beat()
    assert lifecycle.reap_lost_runs() == [(trial.id, 1)]
    # The stale run's token writes nothing any more.
    answer = requests.get(
        f"{host_agent.url}/api/v1/trials/{trial.id}/",
        headers={"Authorization": f"Token {run.token}"},
        timeout=30,
    )
    assert answer.status_code == 401

    def host_beat(runs):
        return host_agent.api.host_heartbeat(
            pool=DEFAULT_POOL, devices=["cpu0"], gpu=False, started_at=timezone.now(), runs=runs
        )

    # Back in touch, still running the old copy: told so, and not placeable meanwhile.
    info = host_beat([(trial.id, 1)])
    assert info.stale_runs == [[trial.id, 1]] and info.stale_shares == []
    assert info.outage_tolerance_seconds == TOLERANCE
    assert not WorkerHost.objects.get(name=host_agent.name).is_alive()
    assert scheduling.place_queued_runs() == []  # run 2 waits: the old copy holds the slot
    # The copy stopped (its lease released): placeable again, and run 2 goes there.
    assert host_beat([]).stale_runs == []
    assert WorkerHost.objects.get(name=host_agent.name).is_alive()
    scheduling.place_queued_runs()  # (the heartbeat requested a pass too)
    assert TrialRun.objects.get(trial=trial, run_id=2).host.name == host_agent.name


@pytest.mark.usefixtures("agent_lease")
def test_a_run_named_stale_is_stopped_and_listed_until_its_process_ended(
    stubborn,  # noqa: F811 - the imported fixture
):
    process, _child = stubborn
    lines: list[str] = []
    stale = leases.hold(leases.RUN, 7, 5, 0, claimed=time.monotonic())
    other = leases.hold(leases.RUN, 7, 6, 0, claimed=time.monotonic())
    try:
        leases.attach(stale, supervision.ProcessGroupKiller(process, grace=0.5), lines.append)
        assert leases.expire_stale([(7, 5), (9, 9)], []) == 1
        assert stale.expired and not other.expired
        assert "the master ended trial 7 run 5" in lines[0]
        # Listed with every heartbeat until its process ended: the master keeps the host fenced.
        sent: list[list[tuple[int, int]]] = []
        leases.renew(lambda runs, shares: sent.append(sorted(runs)))
        assert sent == [[(7, 5), (7, 6)]]
        # It ignores SIGTERM: the watchdog's SIGKILL follows the grace.
        wait_for(lambda: leases.check() is not None and stale.killer.killed, 30, "SIGKILL")
        process.wait(timeout=30)
    finally:
        leases.release(stale)
        leases.release(other)


@pytest.mark.usefixtures("agent_lease")
def test_a_run_named_stale_after_its_process_ended_is_no_loss():
    """The heartbeat listed the run, then its process ended and this host reported the exit:
    the master's answer names the run EXITED, which is that exit, not a loss."""
    lines: list[str] = []
    lease = leases.hold(leases.RUN, 7, 8, 0, claimed=time.monotonic())
    try:
        process = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
        process.wait(timeout=30)
        leases.attach(lease, supervision.ProcessGroupKiller(process, grace=0.5), lines.append)
        assert leases.expire_stale([(7, 8)], []) == 0
        assert not lease.expired
        assert lines == []
    finally:
        leases.release(lease)


@pytest.mark.usefixtures("fresh_supervision")
def test_a_run_whose_heartbeat_finds_it_ended_stops_its_copy(
    host_agent, django_user_model, monkeypatch
):
    from tests.helpers import make_tar_gz
    from tests.helpers_agent import configure_agent, log_lines, trial_on_agent
    from workers import runner

    # SIGTERM is enough; the run heartbeat (which finds the run ended) every 0.2 s.
    configure_agent(HEADWAY_KILL_GRACE_SECONDS=600.0, HEADWAY_STOP_POLL_SECONDS=0.2)
    monkeypatch.setattr(leases, "_held", {})
    owner = django_user_model.objects.create_user("stale-owner")
    source = {
        "entrypoint": "echo started; sleep 120",
        "searcher": {"name": "single", "metric": "loss", "max_length": 5},
        "max_restarts": 0,
    }
    trial = trial_on_agent(host_agent, owner, source, make_tar_gz({"empty.txt": ""}))
    seen: dict = {}
    register = supervision.register

    def register_then_reap(trial_id, run_id, killer, node_rank=0):
        register(trial_id, run_id, killer, node_rank)
        seen["killer"] = killer
        # As the reaper does for a host cut off while the master served others.
        lifecycle.trial_run_exited(trial_id=trial_id, run_id=run_id, exit_code=None, reason="cut")

    monkeypatch.setattr(supervision, "register", register_then_reap)
    try:
        runner.run_trial(trial.id, 1)
        assert seen["killer"].process.returncode == -signal.SIGTERM  # stopped, not left running
    finally:
        if "killer" in seen and seen["killer"].process.poll() is None:
            os.killpg(seen["killer"].process.pid, signal.SIGKILL)
    assert any("the master ended run 1 (lost)" in line for line in log_lines(trial))
    assert reload(trial).run_id == 2 and trial.restarts == 0  # the reap's doing, once
