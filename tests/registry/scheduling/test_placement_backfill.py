"""Placement semantics at scale (``registry.scheduling``): backfill with reservations, pools,
a pass whose queries do not grow with the queue, configs that no longer validate.

As in tests/registry/scheduling/test_scheduler.py, everything runs inside the test's transaction and each test
calls ``place_queued_runs()`` itself.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from registry import lifecycle, scheduling
from registry.models import Experiment, RunShare, RunState, State, Trial, TrialRun, WorkerHost
from registry.scheduling import schedule_run
from tests.helpers import register_host, reload, start_run, submit_single_trial

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("placement-owner")


@pytest.fixture
def submit(owner):
    """``submit(slots=1, pool=None)``: a single-trial experiment; returns its trial."""

    def create(slots: int = 1, pool: str | None = None):
        extra = {} if pool is None else {"resource_pool": pool}
        return submit_single_trial(owner, slots_per_trial=slots, **extra)

    return create


def where(trial) -> str | None:
    """Name of the host the trial's current run is placed on (None: waiting)."""
    run = TrialRun.objects.select_related("host").get(trial=trial, run_id=reload(trial).run_id)
    return run.host.name if run.host else None


def used_on(name: str) -> int:
    """Slots held on host ``name`` by runs that have not EXITED."""
    runs = TrialRun.objects.filter(host__name=name).exclude(state=RunState.EXITED)
    return sum(runs.values_list("slots", flat=True))


def finish(trial) -> None:
    start_run(trial)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=reload(trial).run_id, exit_code=0)


def test_narrow_runs_backfill_around_a_wide_head_without_taking_its_host(submit):
    register_host("a", 4)
    register_host("b", 4)
    three, two = submit(3), submit(2)
    scheduling.place_queued_runs()
    assert (where(three), where(two)) == ("a", "b")  # best fit: a 1 free, b 2 free
    head = submit(4)  # fits no host now: reserves b, the one with the most free slots
    narrow = [submit(1) for _ in range(4)]
    placed = scheduling.place_queued_runs()
    # The first narrow run fills a's free slot; b's 2 free slots stay for the head.
    assert placed == [(narrow[0].id, 1)] and where(narrow[0]) == "a"
    assert where(head) is None and used_on("b") == 2
    assert [where(t) for t in narrow[1:]] == [None, None, None]
    # a frees a slot: the next narrow run takes it; b is still the head's.
    finish(narrow[0])
    assert scheduling.place_queued_runs() == [(narrow[1].id, 1)]
    assert where(narrow[1]) == "a" and used_on("b") == 2 and where(head) is None
    # b's run ends: the head starts there at once, delayed by nothing placed after it.
    finish(two)
    assert scheduling.place_queued_runs()[0] == (head.id, 1)
    assert where(head) == "b"


def test_a_ganged_head_reserves_its_hosts(submit):
    register_host("a", 2)
    register_host("b", 2)
    register_host("c", 2)
    holders = [submit(1), submit(1)]
    scheduling.place_queued_runs()
    assert [where(t) for t in holders] == ["a", "a"]
    gang = submit(6)  # 3 x 2: needs a as well, which is busy: reserves a, b and c
    narrow = submit(1)
    assert scheduling.place_queued_runs() == []
    assert where(gang) is None and where(narrow) is None
    for trial in holders:
        finish(trial)
    assert scheduling.place_queued_runs() == [(gang.id, 1)]
    run = TrialRun.objects.get(trial=gang)
    shares = RunShare.objects.filter(run=run).values_list("host__name", flat=True)
    assert {run.host.name, *shares} == {"a", "b", "c"}


def test_a_run_no_host_can_ever_fit_reserves_nothing(submit):
    register_host("a", 2)
    huge = submit(3)  # 3 = 3 x 1 needs three hosts; a alone can never hold it
    small = submit(2)
    assert scheduling.place_queued_runs() == [(small.id, 1)]
    assert reload(huge).scheduling_message.startswith("needs 3 slots")


@pytest.fixture
def two_pools(settings, tmp_path):
    path = tmp_path / "pools.yaml"
    path.write_text("- {name: default, type: agent}\n- {name: gpu, type: agent}\n")
    settings.HEADWAY_RESOURCE_POOLS = str(path)


def test_a_run_goes_only_to_hosts_of_its_pool_and_one_pass_places_every_pool(two_pools, submit):
    register_host("cpu-a", 1)
    register_host("gpu-a", 2, gpu=True, pool="gpu")
    cpu_runs = [submit(1), submit(1)]
    gpu_run = submit(2, pool="gpu")
    placed = scheduling.place_queued_runs()
    assert sorted(placed) == sorted([(cpu_runs[0].id, 1), (gpu_run.id, 1)])
    assert (where(cpu_runs[0]), where(gpu_run)) == ("cpu-a", "gpu-a")
    # gpu-a frees up, cpu-a is still full: the default pool's run does not go to gpu-a.
    finish(gpu_run)
    assert scheduling.place_queued_runs() == [] and where(cpu_runs[1]) is None
    # The default pool's queue is stopped (its waiting run reserved cpu-a): the gpu pool's
    # queue still goes on in the same pass.
    another = submit(2, pool="gpu")
    assert scheduling.place_queued_runs() == [(another.id, 1)] and where(another) == "gpu-a"
    assert where(cpu_runs[1]) is None


def test_pass_queries_do_not_grow_with_the_queue(submit):
    register_host("a", 1)
    register_host("b", 2)
    busy = [submit(1), submit(2)]
    assert len(scheduling.place_queued_runs()) == 2 and None not in map(where, busy)

    def pass_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert scheduling.place_queued_runs() == []
        return len(queries)

    for _ in range(3):
        submit(1)
    submit(2)
    scheduling.place_queued_runs()  # messages settle
    few = pass_queries()
    for _ in range(30):
        submit(1)
    for _ in range(5):
        submit(2)
    scheduling.place_queued_runs()
    assert pass_queries() == few


def test_placements_are_written_together_whatever_their_number(submit):
    def queries_placing(count: int) -> int:
        for _ in range(count):
            submit(1)
        with CaptureQueriesContext(connection) as queries:
            assert len(scheduling.place_queued_runs()) == count
        return len(queries)

    register_host("a", 2)
    two = queries_placing(2)
    register_host("b", 12)
    assert queries_placing(12) == two


def test_a_stored_config_that_no_longer_validates_is_reported_not_defaulted(submit):
    register_host("a", 2)
    broken = submit(1)
    lifecycle.trial_pause(trial_id=broken.id)  # drops its queued run
    experiment = Experiment.objects.get(id=broken.experiment_id)
    experiment.config["resources"] = {"slots_per_trial": 0}  # as an older version stored it
    experiment.save(update_fields=["config"])
    # The trial is queued again from that config (as resuming it would, without the checks
    # made at activation).
    Trial.objects.filter(id=broken.id).update(state=State.ACTIVE)
    with transaction.atomic():
        schedule_run(Trial.objects.select_for_update().get(id=broken.id))
    run = TrialRun.objects.get(trial=broken, run_id=reload(broken).run_id)
    assert run.slots_needed is None
    after = submit(1)
    assert scheduling.place_queued_runs() == [(after.id, 1)]
    message = reload(broken).scheduling_message
    assert "resources.slots_per_trial" in message and message.startswith("not placed")
    assert where(broken) is None


def test_a_lost_host_does_not_keep_the_runs_placed_on_it(submit, settings):
    from datetime import timedelta

    from django.utils import timezone

    register_host("a", 1)
    trial = submit(1)
    scheduling.place_queued_runs()
    assert where(trial) == "a"
    stale = timezone.now() - timedelta(seconds=settings.HEADWAY_HOST_TIMEOUT_SECONDS + 1)
    WorkerHost.objects.filter(name="a").update(heartbeat_at=stale)
    register_host("b", 1)
    assert scheduling.place_queued_runs() == [(trial.id, 2)]
    assert where(trial) == "b"
