"""Determined 0.38 forms in the registry: time-metric ASHA stopping a trial through the
preemption signal when its validation metrics are ingested, a trial log line for a validation
without the time metric, trials of searches without ``max_length``, ``resources.max_slots``
in placement, and ``log_policies`` ending a trial's retries."""

from __future__ import annotations

import pytest

from registry import lifecycle, scheduling
from registry.metrics import metrics_report
from registry.models import RunState, State, Trial, TrialLog, TrialRun
from tests.helpers import TINY_MODEL, current_run, register_host, reload
from tests.helpers import start_run as start

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("parity-owner")


def create(owner, searcher: dict, **fields: object):
    config = {
        "entrypoint": ["python", "train.py"],
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": searcher,
        "reproducibility": {"experiment_seed": 5},
        **fields,
    }
    return lifecycle.experiment_create(
        owner=owner, config_source=config, model_definition=TINY_MODEL
    )


TIME_ASHA = {
    "name": "adaptive_asha",
    "metric": "loss",
    "time_metric": "batches",
    "max_time": 8,
    "max_trials": 3,
    "max_rungs": 2,
    "divisor": 2,
    "mode": "aggressive",
    "max_concurrent_trials": 2,
}


def validation(trial: Trial, steps: int, **metrics: object) -> None:
    report = {"group": "validation", "steps_completed": steps, "metrics": metrics}
    metrics_report(trial_id=trial.id, reports=[report])


def trial(experiment, request_id: str) -> Trial:
    return Trial.objects.get(experiment=experiment, request_id=request_id)


def test_a_losing_trial_is_stopped_by_preemption_and_ends_completed(owner):
    experiment = create(owner, TIME_ASHA)
    first, second = trial(experiment, "1"), trial(experiment, "2")
    assert first.searcher_length is None  # no operation: the script decides
    start(first), start(second)
    validation(first, 4, loss=0.2, batches=4)
    assert reload(first).progress == pytest.approx(0.5)  # batches / max_time
    validation(second, 4, loss=0.9, batches=4)  # worse at rung 0 (4 batches): stopped
    assert reload(second).searcher_closed
    assert current_run(second).stop_requested == "close"  # should_preempt() is now True
    assert Trial.objects.filter(experiment=experiment).count() == 3  # its replacement
    assert TrialLog.objects.filter(
        trial=second, message__contains="adaptive_asha stops this trial at batches=4"
    ).exists()
    assert not reload(first).searcher_closed
    # The stopped trial checkpoints, acknowledges and exits 0: COMPLETED, not resumed.
    lifecycle.trial_preempt_acknowledge(trial_id=second.id, run_id=reload(second).run_id)
    lifecycle.trial_run_exited(trial_id=second.id, run_id=reload(second).run_id, exit_code=0)
    assert reload(second).state == State.COMPLETED


def test_a_validation_without_the_time_metric_is_named_in_the_trial_log(owner):
    experiment = create(owner, TIME_ASHA)
    first = trial(experiment, "1")
    start(first)
    validation(first, 4, loss=0.2)
    line = TrialLog.objects.get(trial=first).message
    assert "has no number 'batches'" in line and "time_metric: batches" in line
    assert not reload(first).searcher_closed


def test_searches_with_operations_ignore_validation_time_metrics(owner):
    experiment = create(
        owner, {**TIME_ASHA, "time_metric": None, "max_time": None, "max_length": 8}
    )
    first = trial(experiment, "1")
    assert first.searcher_length == 4  # rung 0 of 8 with divisor 2
    start(first)
    validation(first, 4, loss=0.2, batches=4)
    assert not reload(first).searcher_closed
    assert not TrialLog.objects.filter(trial=first).exists()


def test_a_trial_without_max_length_ends_completed_when_its_process_exits(owner):
    experiment = create(owner, {"name": "random", "metric": "loss", "max_trials": 2})
    trials = list(experiment.trials.order_by("id"))
    assert [t.searcher_length for t in trials] == [None, None]
    for each in trials:
        start(each)
        validation(each, 3, loss=0.5)
        lifecycle.trial_run_exited(trial_id=each.id, run_id=reload(each).run_id, exit_code=0)
        assert reload(each).state == State.COMPLETED and reload(each).early_exit == ""
    experiment.refresh_from_db()
    assert experiment.state == State.COMPLETED and experiment.progress == 1.0


def test_max_slots_caps_the_slots_an_experiment_holds_at_once(owner):
    register_host("wide", 4)
    capped = create(
        owner,
        {"name": "random", "metric": "loss", "max_trials": 3, "max_concurrent_trials": 0},
        resources={"max_slots": 2},
    )
    other = create(owner, {"name": "single", "metric": "loss"})
    placed = scheduling.place_queued_runs()
    capped_ids = set(capped.trials.values_list("id", flat=True))
    # Two of the three capped trials, and the other experiment past the third (no blocking).
    assert len([t for t, _ in placed if t in capped_ids]) == 2
    assert other.trials.get().id in {t for t, _ in placed}
    waiting = capped.trials.get(id__in=capped_ids - {t for t, _ in placed})
    assert "resources.max_slots 2" in reload(waiting).scheduling_message
    # A capped trial's run ends: the waiting one may go.
    TrialRun.objects.filter(trial_id=placed[0][0]).update(state=RunState.EXITED)
    assert scheduling.place_queued_runs() == [(waiting.id, 1)]


@pytest.mark.parametrize(
    ("line", "restarted"),
    [("RuntimeError: CUDA out of memory", False), ("ValueError: something else", True)],
)
def test_a_cancel_retries_log_policy_ends_the_retries(owner, line: str, restarted: bool):
    policy = {"name": "oom", "pattern": "CUDA out of memory", "action": {"type": "cancel_retries"}}
    experiment = create(
        owner, {"name": "single", "metric": "loss"}, max_restarts=3, log_policies=[policy]
    )
    (failing,) = experiment.trials.all()
    run = start(failing)
    TrialLog.objects.create(trial=failing, run_id=run.run_id, message=line)
    lifecycle.trial_run_exited(trial_id=failing.id, run_id=run.run_id, exit_code=1)
    failing = reload(failing)
    if restarted:
        assert failing.state == State.ACTIVE and failing.restarts == 1
    else:
        assert failing.state == State.ERROR and failing.restarts == 0
        assert TrialLog.objects.filter(
            trial=failing, message__contains="log policy 'oom' matched (cancel_retries)"
        ).exists()
