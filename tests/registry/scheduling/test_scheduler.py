"""Placement of queued runs on worker hosts (``registry.scheduling``), with the real lifecycle.

Everything runs inside the test's transaction: ``schedule_run``'s on-commit pass never fires,
so each test calls ``place_queued_runs()`` itself, and tasks are seen only through
``django_capture_on_commit_callbacks``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry import lifecycle, scheduling
from registry.models import RunState, State, Trial, TrialRun, WorkerHost
from registry.scheduling import _placement
from tests.helpers import register_host, reload, start_run, submit_single_trial

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("scheduler-owner")


@pytest.fixture
def host():
    """``host(name, slots, gpu=False, pool=None)`` registers an alive host (``register_host``)."""
    return register_host


@pytest.fixture
def submit(owner):
    """``submit(slots=1, priority=None)``: a single-trial experiment; returns its trial."""

    def create(slots: int = 1, priority: int | None = None) -> Trial:
        extra = {} if priority is None else {"priority": priority}
        return submit_single_trial(owner, slots_per_trial=slots, **extra)

    return create


def placement(trial: Trial) -> tuple[str | None, list[str]]:
    """(host name, devices) of the trial's current run."""
    run = TrialRun.objects.select_related("host").get(trial=trial, run_id=reload(trial).run_id)
    return (run.host.name if run.host else None, run.devices)


def test_a_run_queued_in_a_transaction_is_not_placed_before_it_commits(host, submit):
    host("a", 1)
    trial = submit()  # schedule_run asked for a pass on commit, which never comes here
    assert placement(trial) == (None, [])


def test_runs_fill_each_host_s_slots_with_its_lowest_free_devices(host, submit, settings):
    host("a", 2, gpu=True)
    host("b", 2, gpu=True)
    trials = [submit() for _ in range(5)]
    placed = scheduling.place_queued_runs()
    assert placed == [(t.id, 1) for t in trials[:4]]
    where = [placement(t) for t in trials]
    # Best fit: the first run goes to "a" (tie broken by name), the second too (fewest free).
    assert where[:4] == [("a", ["0"]), ("a", ["1"]), ("b", ["0"]), ("b", ["1"])]
    assert where[4] == (None, [])
    assert reload(trials[4]).scheduling_message == ""  # it only waits its turn


def test_slots_come_back_when_a_run_exits_and_go_to_the_next_in_line(host, submit):
    host("a", 2)
    first, second, third = submit(), submit(), submit()
    scheduling.place_queued_runs()
    start_run(first)
    lifecycle.trial_run_exited(trial_id=first.id, run_id=1, exit_code=0)
    assert scheduling.place_queued_runs() == [(third.id, 1)]
    assert placement(third) == ("a", ["cpu0"])  # the device `first` held
    assert placement(second) == ("a", ["cpu1"])


@pytest.mark.parametrize("ending", ["exit", "kill-queued", "pause-queued", "lost"])
def test_slots_are_free_however_a_run_ends(host, submit, ending):
    host("a", 1)
    holder, waiter = submit(), submit()
    scheduling.place_queued_runs()
    assert placement(holder)[0] == "a" and placement(waiter)[0] is None
    if ending == "exit":
        start_run(holder)
        lifecycle.trial_run_exited(trial_id=holder.id, run_id=1, exit_code=1)
    elif ending == "kill-queued":
        lifecycle.trial_kill(trial_id=holder.id)
    elif ending == "pause-queued":
        lifecycle.trial_pause(trial_id=holder.id)
    else:
        start_run(holder)
        TrialRun.objects.filter(trial=holder).update(
            heartbeat_at=timezone.now() - timedelta(hours=1)
        )
        assert lifecycle.reap_lost_runs(timeout=timedelta(minutes=1)) == [(holder.id, 1)]
    placed = dict(scheduling.place_queued_runs())
    assert placed[waiter.id] == 1
    assert placement(waiter) == ("a", ["cpu0"])


def test_a_smaller_priority_goes_first_then_submission_order(host, submit):
    host("a", 1)
    early = submit()
    urgent = submit(priority=1)
    late = submit(priority=1)
    assert scheduling.place_queued_runs() == [(urgent.id, 1)]
    TrialRun.objects.filter(trial=urgent).update(state=RunState.EXITED)
    assert scheduling.place_queued_runs() == [(late.id, 1)]
    TrialRun.objects.filter(trial=late).update(state=RunState.EXITED)
    assert scheduling.place_queued_runs() == [(early.id, 1)]


def test_a_narrower_run_may_not_take_the_slots_a_waiting_run_reserved(host, submit):
    host("a", 2)
    small = submit()
    scheduling.place_queued_runs()
    wide = submit(slots=2)  # 1 slot free: waits, and reserves host a
    behind = submit()  # would fit in the free slot, but that would delay `wide`
    assert scheduling.place_queued_runs() == []
    assert placement(wide) == (None, []) and placement(behind) == (None, [])
    TrialRun.objects.filter(trial=small).update(state=RunState.EXITED)
    assert scheduling.place_queued_runs() == [(wide.id, 1)]
    assert placement(wide) == ("a", ["cpu0", "cpu1"])


def test_a_run_no_host_can_fit_gets_a_message_and_blocks_nobody(host, submit):
    host("gpu-a", 2, gpu=True)
    host("gpu-b", 1, gpu=True)
    huge = submit(slots=4)
    after = submit()
    assert scheduling.place_queued_runs() == [(after.id, 1)]
    message = (
        "needs 4 slots; the largest alive worker host (gpu-a) has 2, and no group of alive hosts"
        " can give the same number of slots each to add up to 4 (2 alive hosts, 3 slots in all)"
    )
    assert reload(huge).scheduling_message == message
    # A bigger host registers: the run is placed and the message goes.
    host("gpu-c", 4, gpu=True)
    assert scheduling.place_queued_runs() == [(huge.id, 1)]
    assert placement(huge) == ("gpu-c", ["0", "1", "2", "3"])
    assert reload(huge).scheduling_message == ""


def test_without_hosts_runs_wait_for_one_to_register(host, submit, api):
    trial = submit()
    assert scheduling.place_queued_runs() == []
    assert reload(trial).scheduling_message == scheduling.NO_HOSTS
    shown = api.get(f"/api/v1/trials/{trial.id}/").json()
    assert shown["scheduling_message"] == scheduling.NO_HOSTS
    experiment = api.get(f"/api/v1/experiments/{trial.experiment_id}/").json()
    assert experiment["scheduling_message"] == scheduling.NO_HOSTS
    host("a", 1)
    scheduling.place_queued_runs()
    assert api.get(f"/api/v1/trials/{trial.id}/").json()["scheduling_message"] == ""
    experiment = api.get(f"/api/v1/experiments/{trial.experiment_id}/").json()
    assert experiment["scheduling_message"] == ""


def test_a_message_goes_when_its_trial_stops_waiting(submit):
    trial = submit()
    scheduling.place_queued_runs()
    assert reload(trial).scheduling_message == scheduling.NO_HOSTS
    lifecycle.trial_pause(trial_id=trial.id)
    scheduling.place_queued_runs()
    assert reload(trial).scheduling_message == ""


def test_a_lost_host_holds_no_slots_and_its_unclaimed_runs_move(host, submit, settings):
    lost = host("a", 1)
    trial = submit()
    scheduling.place_queued_runs()
    assert placement(trial) == ("a", ["cpu0"])
    too_old = timezone.now() - timedelta(seconds=settings.HEADWAY_HOST_TIMEOUT_SECONDS + 1)
    WorkerHost.objects.filter(id=lost.id).update(heartbeat_at=too_old)
    host("b", 1)
    # Run 1 was never claimed: it is dropped (its task on a's queue finds nothing to claim)
    # and run 2 goes to b.
    assert scheduling.place_queued_runs() == [(trial.id, 2)]
    assert TrialRun.objects.get(trial=trial, run_id=1).state == RunState.EXITED
    assert placement(trial) == ("b", ["cpu0"])
    assert reload(trial).state == State.ACTIVE and reload(trial).restarts == 0


def test_all_hosts_lost_or_stopped_says_so(host, submit):
    host("a", 1)
    scheduling.host_stopped(name="a")
    trial = submit()
    assert scheduling.place_queued_runs() == []
    assert reload(trial).scheduling_message.startswith(
        "waiting for a worker host: none of the 1 registered has sent a heartbeat"
    )


def test_hosts_and_runs_of_another_namespace_are_left_alone(host, submit, settings):
    elsewhere = host("elsewhere", 4)
    WorkerHost.objects.filter(id=elsewhere.id).update(namespace="another-registry")
    mine = submit()
    assert scheduling.place_queued_runs() == []
    host("a", 1)
    settings.CELERY_TASK_DEFAULT_QUEUE = "another-registry"  # that namespace's registry
    assert scheduling.place_queued_runs() == []  # `mine` is not its run
    settings.CELERY_TASK_DEFAULT_QUEUE = TrialRun.objects.get(trial=mine).namespace
    assert scheduling.place_queued_runs() == [(mine.id, 1)]
    assert placement(mine)[0] == "a"


def test_a_heartbeat_asks_for_the_pass_of_its_own_host_s_namespace(
    submit, settings, monkeypatch, django_capture_on_commit_callbacks
):
    # The process serving the beat may be set to another namespace (one web server answering
    # hosts of two registries): the pass the beat asks for is the one whose capacity it added.
    from registry.lifecycle import host_agent
    from registry.pools import DEFAULT_POOL

    monkeypatch.setattr(_placement, "send_run_task", lambda *args: None)
    mine = submit()
    namespace = TrialRun.objects.get(trial=mine).namespace
    settings.CELERY_TASK_DEFAULT_QUEUE = "another-registry"
    with django_capture_on_commit_callbacks(execute=True):
        host_agent.host_beat(
            "a",
            pool=DEFAULT_POOL,
            devices=["cpu0"],
            gpu=False,
            started_at=timezone.now(),
            namespace=namespace,
        )
    assert placement(mine) == ("a", ["cpu0"])


def test_a_run_s_exit_asks_for_the_pass_of_the_run_s_namespace(
    host, submit, settings, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(_placement, "send_run_task", lambda *args: None)
    host("a", 1)
    first, second = submit(), submit()
    assert scheduling.place_queued_runs() == [(first.id, 1)]
    start_run(first)
    settings.CELERY_TASK_DEFAULT_QUEUE = "another-registry"  # the process serving the exit
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.trial_run_exited(trial_id=first.id, run_id=1, exit_code=0)
    assert placement(second) == ("a", ["cpu0"])  # the slot `first` freed, at once


def test_the_task_goes_to_the_host_s_queue_once_the_placement_commits(
    host, submit, monkeypatch, django_capture_on_commit_callbacks
):
    sent: list[tuple[int, int, str]] = []
    monkeypatch.setattr(_placement, "send_run_task", lambda *args: sent.append(args))
    placed_on = host("a", 1)
    trial = submit()
    with django_capture_on_commit_callbacks(execute=True):
        scheduling.place_queued_runs()
    assert sent == [(trial.id, 1, placed_on.queue)]


def test_a_restarted_worker_gets_its_placed_runs_sent_again(
    host, submit, monkeypatch, django_capture_on_commit_callbacks
):
    from registry.scheduling import _hosts

    sent: list[tuple[int, int, str]] = []
    monkeypatch.setattr(_hosts, "send_run_task", lambda *args: sent.append(args))
    placed_on = host("a", 1)
    trial = submit()
    scheduling.place_queued_runs()
    with django_capture_on_commit_callbacks(execute=True):
        assert scheduling.host_redispatch(name="a") == 1
    assert sent == [(trial.id, 1, placed_on.queue)]


def test_a_heartbeat_recreates_a_deleted_host(host):
    host("a", 2)
    WorkerHost.objects.all().delete()  # as a transactional test's flush does
    again = host("a", 2)
    assert WorkerHost.objects.get().id == again.id and again.alive


def test_the_runner_hands_its_assigned_devices_to_the_trial(host, submit, tmp_path):
    import os

    from headway.client import wire
    from registry.lifecycle import host_agent
    from workers import launch

    def environment(trial, host_name):
        # The launch spec the master gives the host, and the environment the host builds.
        run = start_run(trial)
        spec = host_agent.launch_spec(host_name, run.trial_id, run.run_id)
        return launch.environment(wire.LaunchSpec.model_validate(spec), "t", tmp_path / "i.json")

    host("gpu-a", 2, gpu=True)
    host("cpu-b", 1)
    on_gpu, on_cpu = submit(slots=2), submit()
    scheduling.place_queued_runs()
    gpu_env = environment(on_gpu, "gpu-a")
    assert gpu_env["CUDA_VISIBLE_DEVICES"] == "0,1" and gpu_env["HEADWAY_SLOT_IDS"] == "0,1"
    cpu_env = environment(on_cpu, "cpu-b")
    assert cpu_env["HEADWAY_SLOT_IDS"] == "cpu0"
    # CPU slots leave CUDA_VISIBLE_DEVICES as the worker has it.
    assert cpu_env.get("CUDA_VISIBLE_DEVICES") == os.environ.get("CUDA_VISIBLE_DEVICES")


@pytest.mark.django_db(transaction=True)
def test_concurrent_passes_never_hand_out_a_slot_twice(host, submit, monkeypatch):
    import threading

    from django.db import connection

    from tests.helpers import require

    require(connection.vendor == "postgresql", "concurrent placement needs PostgreSQL")
    monkeypatch.setattr(_placement, "send_run_task", lambda *args: None)
    trials = [submit() for _ in range(6)]  # committed: each asked for a pass (no host yet)
    host("a", 2)
    host("b", 1)
    placed: list[tuple[int, int]] = []
    barrier = threading.Barrier(6)

    def place() -> None:
        barrier.wait()
        try:
            placed.extend(scheduling.place_queued_runs())
        finally:
            connection.close()

    threads = [threading.Thread(target=place) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(placed) == sorted((t.id, 1) for t in trials[:3])
    devices = [placement(t) for t in trials[:3]]
    assert sorted(devices) == [("a", ["cpu0"]), ("a", ["cpu1"]), ("b", ["cpu0"])]
