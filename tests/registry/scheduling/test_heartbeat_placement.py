"""Which host-agent calls ask for a placement pass (``registry.lifecycle.host_agent``).

A pass reads every waiting run, so a heartbeat asks for one only when it can make a placement
possible that was not (a host new or back alive, more or other slots, the agent's first beat);
the beat of an alive host that changed nothing asks for none. As in test_scheduler.py
everything runs inside the test's transaction: the passes a call asks for run when
``django_capture_on_commit_callbacks(execute=True)`` runs its on-commit callbacks, so a run
that stays unplaced after a call is one no pass was asked for.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry import lifecycle, scheduling
from registry.lifecycle import host_agent
from registry.models import RunShare, RunState, Trial, TrialRun, WorkerHost
from registry.pools import DEFAULT_POOL
from registry.scheduling import _placement
from tests.helpers import register_host, reload, start_run, submit_single_trial

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """Placed runs' tasks go nowhere (no worker consumes them here)."""
    monkeypatch.setattr(_placement, "send_run_task", lambda *args: None)
    monkeypatch.setattr(_placement, "send_share_task", lambda *args: None)


@pytest.fixture
def submit(django_user_model):
    """``submit(slots=1, **resources)``: a single-trial experiment whose run 1 waits (its
    pass never runs)."""
    owner = django_user_model.objects.create_user("heartbeat-owner")

    def create(slots: int = 1, **resources) -> Trial:
        return submit_single_trial(owner, slots_per_trial=slots, **resources)

    return create


@pytest.fixture
def beat(django_capture_on_commit_callbacks):
    """``beat(host, slots=1, **fields)``: one ``host_beat`` of a CPU host, committed (its
    on-commit callbacks run); returns how many on-commit callbacks it left (0: no pass
    was asked for; a pass leaves its own, its tasks' sends)."""

    def send(host: str, slots: int = 1, **fields) -> int:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            host_agent.host_beat(
                host,
                pool=fields.pop("pool", DEFAULT_POOL),
                devices=[f"cpu{i}" for i in range(slots)],
                gpu=False,
                started_at=timezone.now(),
                **fields,
            )
        return len(callbacks)

    return send


def host_of(trial: Trial) -> str | None:
    run = TrialRun.objects.select_related("host").get(trial=trial, run_id=reload(trial).run_id)
    return run.host.name if run.host else None


def went_silent(host: str, settings) -> None:
    """``host`` sent nothing for longer than the host timeout (no longer alive)."""
    too_old = timezone.now() - timedelta(seconds=settings.HEADWAY_HOST_TIMEOUT_SECONDS + 1)
    WorkerHost.objects.filter(name=host).update(heartbeat_at=too_old)


def test_a_beat_of_an_alive_host_that_changed_nothing_asks_for_no_pass(beat, submit):
    assert beat("a")  # its first beat asks for a pass (nothing waits yet)
    trial = submit()  # waits: its own pass request never commits here
    assert beat("a") == 0
    assert host_of(trial) is None
    # It was placeable all along: the next pass asked for by anything else places it.
    assert scheduling.place_queued_runs() == [(trial.id, 1)]
    assert host_of(trial) == "a"


def test_a_host_s_first_beat_places_a_waiting_run(beat, submit):
    trial = submit()
    assert beat("a")
    assert host_of(trial) == "a"


def test_a_beat_after_the_host_went_silent_places_a_waiting_run(beat, submit, settings):
    beat("a")
    trial = submit()
    went_silent("a", settings)
    assert beat("a")
    assert host_of(trial) == "a"


def test_a_beat_after_the_host_stopped_places_a_waiting_run(beat, submit):
    beat("a")
    trial = submit()
    host_agent.host_stop("a")
    assert beat("a")
    assert host_of(trial) == "a"


def test_a_beat_with_more_slots_places_a_run_that_did_not_fit(beat, submit):
    beat("a", slots=1)
    trial = submit(slots=2)
    beat("a", slots=1)
    assert host_of(trial) is None
    assert beat("a", slots=2)
    assert host_of(trial) == "a"


def test_a_beat_joining_another_pool_places_that_pool_s_waiting_run(
    beat, submit, settings, tmp_path
):
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: default, type: agent}\n- {name: gpu, type: agent}\n")
    settings.HEADWAY_RESOURCE_POOLS = str(pools)
    beat("a")
    trial = submit(resource_pool="gpu")
    beat("a")
    assert host_of(trial) is None
    assert beat("a", pool="gpu")
    assert host_of(trial) == "a"


def test_an_agent_s_first_beat_places_a_waiting_run_whatever_it_changed(beat, submit):
    beat("a")
    trial = submit()
    assert beat("a", redispatch=True)
    assert host_of(trial) == "a"


def test_a_fenced_beat_asks_for_no_pass_and_the_beat_after_it_places(beat, submit, settings):
    beat("a")
    trial = submit()
    scheduling.place_queued_runs()
    start_run(reload(trial))
    # Cut off: the master ended its run as lost and queued run 2, which waits for a host.
    went_silent("a", settings)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=None, reason="cut off")
    assert reload(trial).run_id == 2
    # Back, still running run 1: fenced, not placeable, and no pass is asked for.
    assert beat("a", runs=[{"trial_id": trial.id, "run_id": 1}]) == 0
    assert not WorkerHost.objects.get(name="a").is_alive()
    assert host_of(trial) is None
    # Run 1 stopped: the next beat makes the host placeable, and run 2 goes there.
    assert beat("a")
    assert host_of(trial) == "a"


def test_a_stopped_host_s_unclaimed_runs_move_at_once(
    beat, submit, django_capture_on_commit_callbacks
):
    beat("a")
    trial = submit()
    scheduling.place_queued_runs()
    assert host_of(trial) == "a"
    register_host("b", 1)
    with django_capture_on_commit_callbacks(execute=True):
        host_agent.host_stop("a")
    assert host_of(trial) == "b"
    assert reload(trial).run_id == 2


def test_a_share_that_outlives_its_run_frees_its_slots_when_it_exits(
    submit, django_capture_on_commit_callbacks
):
    register_host("a", 2)
    register_host("b", 2)
    gang = submit(slots=4)
    scheduling.place_queued_runs()
    run = start_run(reload(gang))
    share = RunShare.objects.get(run=run)
    assert share.host.name == "b"
    assert lifecycle.share_claim(trial_id=gang.id, run_id=1, node_rank=1, worker="w")
    lifecycle.share_running(share.id)
    first, second = submit(slots=2), submit(slots=2)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.trial_run_exited(trial_id=gang.id, run_id=1, exit_code=0)
    # a's slots came back with the run; b's are held while the share's ranks still run.
    assert (host_of(first), host_of(second)) == ("a", None)
    with django_capture_on_commit_callbacks(execute=True):
        host_agent.share_exit("b", gang.id, 1, 1, exit_code=0)
    assert RunShare.objects.get(id=share.id).state == RunState.EXITED
    assert host_of(second) == "b"
