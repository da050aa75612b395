"""What a reconciliation does with a run's Ray job (registry.pools.ray._reconcile.decide), from
Ray's view of the job and its placement group and the run's state."""

from __future__ import annotations

from datetime import timedelta

import pytest

from registry.models import RunState, StopReason
from registry.pools.ray._client import LOST_EXIT, GroupSeen, RayJobSeen
from registry.pools.ray._reconcile import VANISHED_AFTER, Action, decide

OLD = VANISHED_AFTER * 2
PLACED = GroupSeen("CREATED", "FINISHED", ("n1", "n2"))
WAITING = GroupSeen("PENDING", "NO_RESOURCES", ("", ""))


def _decide(seen, run_state=RunState.RUNNING, *, stop="", long_ago=False, group=PLACED, age=OLD):
    return decide(
        seen,
        run_state=run_state,
        stop_requested=stop,
        exited_long_ago=long_ago,
        group=group,
        age=age,
    )


def _job(status: str, code: int | None = None, error: str = "") -> RayJobSeen:
    return RayJobSeen("headway-ns-r1", status, "why", error, code)


def test_a_queued_run_whose_group_waits_says_why_and_a_running_one_is_left_alone():
    assert _decide(_job("RUNNING"), RunState.QUEUED, group=WAITING) is Action.WAITING
    assert _decide(_job("PENDING"), RunState.QUEUED, group=None) is Action.WAITING
    assert _decide(_job("RUNNING"), RunState.RUNNING) is Action.NOTHING


def test_a_job_just_submitted_and_not_listed_yet_is_left_alone_then_lost():
    assert _decide(None, age=timedelta(seconds=1)) is Action.NOTHING
    assert _decide(None, RunState.RUNNING) is Action.LOST
    assert _decide(None, RunState.STARTING) is Action.LOST_BEFORE_START


@pytest.mark.parametrize(
    ("run_state", "stop", "long_ago", "group"),
    [
        (RunState.EXITED, "", False, WAITING),  # closed before its group was placed
        (RunState.EXITED, "", True, PLACED),  # outlived its run's exit
        (RunState.RUNNING, StopReason.KILL, False, PLACED),  # being killed
    ],
)
def test_an_active_job_is_stopped_when_its_run_ended_or_is_killed(run_state, stop, long_ago, group):
    assert _decide(_job("RUNNING"), run_state, stop=stop, long_ago=long_ago, group=group) is (
        Action.STOP
    )


def test_a_job_that_outlives_its_runs_exit_briefly_is_left_to_end_by_itself():
    assert _decide(_job("RUNNING"), RunState.EXITED, long_ago=False) is Action.NOTHING
    # Its driver ending: the group is removed before Ray reports the job's end.
    removed = GroupSeen("REMOVED", "REMOVED", ("n1", "n2"))
    assert _decide(_job("RUNNING"), RunState.EXITED, group=removed) is Action.NOTHING


@pytest.mark.parametrize(
    "seen",
    [
        _job("STOPPED"),
        _job("FAILED", LOST_EXIT),  # the driver: a Ray node or actor lost
        _job("FAILED", None, "JOB_SUPERVISOR_ACTOR_DIED"),
    ],
)
def test_a_job_ended_by_ray_or_a_lost_node_is_a_lost_run_not_counted(seen):
    assert _decide(seen, RunState.RUNNING) is Action.LOST
    assert _decide(seen, RunState.QUEUED) is Action.LOST_BEFORE_START


def test_a_driver_that_failed_by_itself_after_the_ranks_started_counts_as_a_failure():
    assert _decide(_job("FAILED", 1), RunState.RUNNING) is Action.FAILED
    assert _decide(_job("SUCCEEDED", 0), RunState.RUNNING) is Action.FAILED  # no exit reported
    assert _decide(_job("FAILED", 1), RunState.STARTING) is Action.LOST_BEFORE_START


def test_an_ended_job_of_an_ended_run_is_cleaned_up():
    assert _decide(_job("SUCCEEDED", 0), RunState.EXITED) is Action.CLEAN
    assert _decide(_job("STOPPED"), RunState.EXITED) is Action.CLEAN
