"""Runs lost before their ranks started: re-queued after a back-off, ERROR after
``max_lost_before_start`` in a row (``registry.lifecycle._lost``), with the real lifecycle and
placement pass. A run lost after it started keeps being re-queued at once and not charged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry import lifecycle, scheduling
from registry.lifecycle._lost import backoff
from registry.models import RunState, State, Trial, TrialLog, TrialRun
from tests.helpers import TINY_MODEL, register_host, reload

pytestmark = pytest.mark.django_db

CAUSE = "host gpu-b could not start run {}: OSError: no space left on device"


@pytest.fixture
def submit(django_user_model):
    """``submit(**top_level)``: a one-slot single-trial experiment; returns its trial."""
    owner = django_user_model.objects.create_user("lost-before-start")

    def create(**top_level) -> Trial:
        config = {
            "entrypoint": "python train.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 10},
            **top_level,
        }
        experiment = lifecycle.experiment_create(
            owner=owner, config_source=config, model_definition=TINY_MODEL
        )
        return experiment.trials.get()

    return create


def claim_and_lose(trial: Trial, *, start: bool = False) -> int:
    """A host claims the trial's current run (and starts it when ``start``), then the run is
    reported lost; returns the run's number."""
    run_id = reload(trial).run_id
    assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=run_id, worker="w") is not None
    if start:
        lifecycle.trial_run_running(trial_id=trial.id, run_id=run_id)
    lifecycle.trial_run_exited(
        trial_id=trial.id, run_id=run_id, exit_code=None, reason=CAUSE.format(run_id)
    )
    return run_id


def log(trial: Trial) -> list[str]:
    return list(TrialLog.objects.filter(trial=trial).values_list("message", flat=True))


def test_the_back_off_doubles_up_to_its_cap(settings):
    settings.HEADWAY_LOST_BACKOFF_SECONDS = 10
    settings.HEADWAY_LOST_BACKOFF_MAX_SECONDS = 60
    assert [backoff(n) for n in range(1, 6)] == [10, 20, 40, 60, 60]
    assert backoff(10_000) == 60


def test_a_run_lost_before_start_waits_its_back_off_then_is_placed(submit, settings):
    settings.HEADWAY_LOST_BACKOFF_SECONDS = 10
    register_host("a", 1)
    trial = submit()
    before = timezone.now()
    assert claim_and_lose(trial) == 1
    trial = reload(trial)
    assert (trial.state, trial.run_id, trial.restarts, trial.lost_before_start) == (
        State.ACTIVE, 2, 0, 1,
    )  # fmt: skip
    queued = TrialRun.objects.get(trial=trial, run_id=2)
    assert queued.state == RunState.QUEUED
    assert (
        before + timedelta(seconds=10)
        <= queued.not_before
        <= timezone.now() + timedelta(seconds=10)
    )
    message = trial.scheduling_message
    assert message.startswith(CAUSE.format(1) + " (lost before its ranks started, 1 of 3 in a row)")
    assert ": re-queued, not counted as a restart; next attempt at " in message
    assert message.endswith("(in 10 s)")
    assert f"[headway] run 1: {message}" in log(trial)
    # A free host does not take it during its back-off...
    assert scheduling.place_queued_runs() == []
    assert reload(trial).scheduling_message == message
    # ...and does once it is over; the message then says what it waited for.
    TrialRun.objects.filter(id=queued.id).update(not_before=timezone.now() - timedelta(seconds=1))
    assert scheduling.place_queued_runs() == [(trial.id, 2)]


def test_the_nth_loss_in_a_row_ends_the_trial_error_with_its_cause(submit, settings):
    settings.HEADWAY_LOST_BACKOFF_SECONDS = 10
    trial = submit(max_restarts=5)
    claim_and_lose(trial)
    claim_and_lose(trial)
    second = TrialRun.objects.get(trial=trial, run_id=3)
    assert "2 of 3 in a row" in reload(trial).scheduling_message
    assert reload(trial).scheduling_message.endswith("(in 20 s)")  # doubled
    assert second.not_before is not None
    claim_and_lose(trial)
    trial = reload(trial)
    assert (trial.state, trial.restarts, trial.run_id) == (State.ERROR, 0, 3)
    expected = (
        "failed: lost before its ranks started 3 times in a row (max_lost_before_start 3); "
        f"last: {CAUSE.format(3)}"
    )
    assert trial.scheduling_message == expected
    assert log(trial)[-1] == f"[headway] run 3: {expected}"
    assert not TrialRun.objects.filter(trial=trial, state=RunState.QUEUED).exists()
    assert trial.experiment.__class__.objects.get(id=trial.experiment_id).state == State.ERROR
    # The reason stays on the ended trial through later placement passes.
    scheduling.place_queued_runs()
    assert reload(trial).scheduling_message == expected


def test_max_lost_before_start_is_the_experiment_s(submit):
    trial = submit(max_lost_before_start=1)
    claim_and_lose(trial)
    trial = reload(trial)
    assert trial.state == State.ERROR
    assert "(max_lost_before_start 1)" in trial.scheduling_message


def test_a_run_that_starts_ends_the_streak_and_a_later_loss_is_not_charged(submit):
    trial = submit()
    claim_and_lose(trial)
    claim_and_lose(trial)
    TrialRun.objects.filter(trial=trial, run_id=3).update(not_before=None)
    # Run 3 starts: the count begins again; its loss mid-training is re-queued at once.
    claim_and_lose(trial, start=True)
    trial = reload(trial)
    assert (trial.state, trial.lost_before_start, trial.restarts) == (State.ACTIVE, 0, 0)
    assert TrialRun.objects.get(trial=trial, run_id=4).not_before is None
    assert trial.scheduling_message == scheduling.lost_message(CAUSE.format(3), 1)
    # Two more losses before start do not end it: the streak is new.
    claim_and_lose(trial)
    claim_and_lose(trial)
    assert reload(trial).state == State.ACTIVE
    assert reload(trial).lost_before_start == 2


def test_a_reaped_run_that_never_started_counts_as_lost_before_start(submit):
    trial = submit(max_lost_before_start=2)
    lifecycle.trial_run_claim(trial_id=trial.id, run_id=1, worker="w")
    TrialRun.objects.filter(trial=trial).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert lifecycle.reap_lost_runs(timeout=timedelta(minutes=1)) == [(trial.id, 1)]
    trial = reload(trial)
    assert trial.lost_before_start == 1 and trial.state == State.ACTIVE
    assert "(lost before its ranks started, 1 of 2 in a row)" in trial.scheduling_message
