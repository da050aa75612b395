"""Searcher operations in the registry: lengths a trial is told, a waiting trial resumed when
ASHA promotes it (deferred past the commit), re-queue of a trial promoted while it stopped,
``Close`` through the preemption signal, and early exits (InvalidHP) over the REST API."""

import pytest

from registry import lifecycle
from registry.lifecycle._search import apply_trial_operation
from registry.models import Experiment, RunState, State, Trial
from registry.searcher import Close
from tests.helpers import TINY_CONFIG, create_experiment, current_run, reload
from tests.helpers import start_run as start

pytestmark = pytest.mark.django_db

# Two rungs at 4 and 8 batches; the better half of rung 0 is promoted.
HALVING_CONFIG = TINY_CONFIG.replace(
    "searcher: {name: single, metric: validation_loss, max_length: {batches: 10}}",
    """searcher:
  name: async_halving
  metric: validation_loss
  max_length: {batches: 8}
  num_rungs: 2
  divisor: 2
  max_trials: 2
  max_concurrent_trials: CONCURRENT""",
)


def halving_experiment(api, concurrent: int) -> Experiment:
    config = HALVING_CONFIG.replace("CONCURRENT", str(concurrent))
    response = create_experiment(api, config=config)
    assert response.status_code == 201, response.json()
    return Experiment.objects.get(id=response.json()["id"])


def trial(experiment: Experiment, request_id: str) -> Trial:
    return Trial.objects.get(experiment=experiment, request_id=request_id)


def report(trial: Trial, length: int, metric: float) -> int | None:
    return lifecycle.trial_searcher_completed(trial_id=trial.id, length=length, metric=metric)


def exit_run(trial: Trial, code: int = 0) -> Trial:
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=reload(trial).run_id, exit_code=code)
    return reload(trial)


def test_a_waiting_trial_resumes_when_promoted_and_the_search_completes(api):
    experiment = halving_experiment(api, concurrent=1)
    first = trial(experiment, "1")
    assert (first.searcher_length, first.searcher_completed_length) == (4, 0)
    run = start(first)
    assert run.searcher_length == 4  # what the process is told (cluster info)

    # Rung 0 has one result: no promotion is due, so the trial stops and trial 2 starts.
    assert report(first, 4, 0.5) is None
    assert exit_run(first).state == State.COMPLETED
    second = trial(experiment, "2")
    start(second)
    # Trial 2 is worse: the one promotion now due goes to trial 1, which is not in hand.
    assert report(second, 4, 0.9) is None
    experiment.refresh_from_db()
    assert experiment.searcher_state["deferred"] == [
        {"op": "ValidateAfter", "request_id": "1", "length": 8}
    ]
    assert reload(second).searcher_closed
    assert exit_run(second).state == State.COMPLETED
    experiment.refresh_from_db()
    assert experiment.state == State.ACTIVE  # a deferred operation may resume a trial

    assert lifecycle.apply_deferred_operations(experiment.id) == 1
    first = reload(first)
    assert first.state == State.ACTIVE and first.searcher_length == 8 and first.ended_at is None
    assert current_run(first).run_id == 2 and current_run(first).state == RunState.QUEUED
    experiment.refresh_from_db()
    assert "deferred" not in experiment.searcher_state
    assert lifecycle.apply_deferred_operations(experiment.id) == 0  # idempotent

    assert start(first).searcher_length == 8
    assert report(first, 8, 0.3) is None
    assert exit_run(first).state == State.COMPLETED
    experiment.refresh_from_db()
    assert experiment.state == State.COMPLETED and experiment.progress == 1.0
    assert experiment.searcher_state["shutdown"] is True


def test_a_trial_promoted_while_it_stops_is_requeued_not_completed(api):
    experiment = halving_experiment(api, concurrent=2)
    first, second = trial(experiment, "1"), trial(experiment, "2")
    start(first)
    start(second)
    assert report(first, 4, 0.5) is None  # still running: checkpointing before it exits
    assert report(second, 4, 0.9) is None  # promotes trial 1
    lifecycle.apply_deferred_operations(experiment.id)
    assert reload(first).state == State.ACTIVE and current_run(first).run_id == 1
    first = exit_run(first)
    assert first.state == State.ACTIVE  # its run never heard of length 8: the next one trains it
    assert current_run(first).run_id == 2 and current_run(first).state == RunState.QUEUED


def test_the_reporting_trial_is_told_its_next_length(api):
    experiment = halving_experiment(api, concurrent=2)
    first, second = trial(experiment, "1"), trial(experiment, "2")
    start(first)
    start(second)
    report(second, 4, 0.9)
    url = f"/api/v1/trials/{first.id}/searcher/completed/"
    answer = api.post(url, {"length": 4, "metric": 0.5}, format="json")
    assert answer.status_code == 200 and answer.json()["next_length"] == 8  # promoted at once
    assert current_run(first).searcher_length == 8
    first = exit_run(first)  # it trained on and finished without reporting 8: not resumed
    assert first.state == State.COMPLETED


def test_a_close_stops_a_trial_training_toward_an_operation(api):
    experiment = halving_experiment(api, concurrent=1)
    first = trial(experiment, "1")
    start(first)
    with_lock = Trial.objects.select_related("experiment").get(id=first.id)
    apply_trial_operation(with_lock.experiment, with_lock, Close("1"))
    run = current_run(first)
    assert run.stop_requested == "close"
    lifecycle.trial_preempt_acknowledge(trial_id=first.id, run_id=run.run_id)
    assert exit_run(first).state == State.COMPLETED  # not resumed, though it acknowledged


def test_exiting_without_completing_the_operation_is_an_early_exit(api):
    experiment = Experiment.objects.get(id=create_experiment(api).json()["id"])
    only = experiment.trials.get()
    start(only)
    assert exit_run(only).state == State.COMPLETED
    experiment.refresh_from_db()
    assert experiment.searcher_state["closed"] is False  # heard as exited early
    assert experiment.searcher_state["shutdown"] is True and experiment.state == State.COMPLETED


RANDOM_CONFIG = TINY_CONFIG.replace(
    "searcher: {name: single, metric: validation_loss, max_length: {batches: 10}}",
    "searcher: {name: random, metric: validation_loss, max_length: {batches: 10}, "
    "max_trials: 2, max_concurrent_trials: 1}",
)


def test_invalid_hparams_reported_over_rest_are_replaced(api):
    experiment = Experiment.objects.get(id=create_experiment(api, RANDOM_CONFIG).json()["id"])
    first = experiment.trials.get()
    start(first)
    url = f"/api/v1/trials/{first.id}/searcher/early_exit/"
    bad = api.post(url, {"reason": "bored"}, format="json")
    assert bad.status_code == 400 and "reason" in bad.json()["errors"]
    answer = api.post(url, {"reason": "invalid_hp"}, format="json")
    assert answer.status_code == 200 and answer.json() == {"early_exit": "invalid_hp"}
    first = exit_run(first)
    assert first.state == State.COMPLETED and first.early_exit == "invalid_hp"
    trials = list(experiment.trials.order_by("id"))
    assert [t.request_id for t in trials] == ["1", "2"]
    finished = trials[1]
    start(finished)
    report(finished, 10, 0.1)
    exit_run(finished)
    trials = list(experiment.trials.order_by("id"))
    assert [t.request_id for t in trials] == ["1", "2", "3"]  # the invalid one was replaced
    experiment.refresh_from_db()
    assert experiment.progress == pytest.approx(0.5)


def test_a_killed_trial_of_a_search_is_an_early_exit_and_the_search_goes_on(api):
    experiment = halving_experiment(api, concurrent=1)
    first = trial(experiment, "1")
    start(first)
    lifecycle.trial_kill(trial_id=first.id)
    assert exit_run(first, code=-9).state == State.CANCELED
    second = trial(experiment, "2")  # the bracket created the next trial
    assert second.state == State.ACTIVE
    experiment.refresh_from_db()
    assert experiment.state == State.ACTIVE
