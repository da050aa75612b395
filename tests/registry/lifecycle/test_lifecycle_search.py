"""Searcher events and searches in the registry: single, random and grid over real lifecycle calls."""

import pytest

from registry import lifecycle
from registry.models import Experiment, RunState, State, Trial
from tests.helpers import TINY_CONFIG, create_experiment, current_run, register_checkpoint, reload
from tests.helpers import start_run as start

pytestmark = pytest.mark.django_db


def searcher_state(trial):
    return Experiment.objects.get(id=trial.experiment_id).searcher_state


def test_searcher_hears_the_trial_close_in_the_same_transaction(trial):
    assert searcher_state(trial) == {"created": True, "closed": False, "shutdown": False}
    start(trial)
    lifecycle.trial_searcher_completed(trial_id=trial.id, length=10, metric=0.5)
    assert reload(trial).searcher_completed_length == 10
    lifecycle.trial_searcher_completed(trial_id=trial.id, length=10, metric=None)  # NaN
    assert reload(trial).searcher_completed_length == 10
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)
    assert searcher_state(trial) == {"created": True, "closed": True, "shutdown": True}


def test_searcher_hears_a_killed_trial_exit_early(trial):
    lifecycle.trial_kill(trial_id=trial.id)  # queued run: ends CANCELED at once
    assert reload(trial).state == State.CANCELED
    state = searcher_state(trial)
    assert state["shutdown"] is True and state["closed"] is False


# TINY_CONFIG (same entrypoint and hparams) searched at random.
RANDOM_CONFIG = TINY_CONFIG.replace("name: tiny", "name: random").replace(
    "searcher: {name: single, metric: validation_loss, max_length: {batches: 10}}",
    """searcher:
  name: random
  metric: validation_loss
  max_length: {batches: 10}
  max_trials: 3
  max_concurrent_trials: 2""",
)
assert "max_trials: 3" in RANDOM_CONFIG


def random_experiment(api, config=RANDOM_CONFIG):
    response = create_experiment(api, config=config)
    assert response.status_code == 201, response.json()
    return Experiment.objects.get(id=response.json()["id"])


def trials_of(experiment):
    return list(Trial.objects.filter(experiment=experiment).order_by("id"))


def finish(trial, exit_code=0):
    run = start(reload(trial))
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=exit_code)


def test_a_random_search_runs_max_trials_with_at_most_max_concurrent_at_once(api):
    experiment = random_experiment(api)
    first, second = trials_of(experiment)
    assert [first.request_id, second.request_id] == ["1", "2"]
    assert first.hparams != second.hparams and first.seed != second.seed
    assert current_run(first).state == current_run(second).state == RunState.QUEUED
    start(first)
    start(second)
    lifecycle.trial_report_progress(trial_id=first.id, progress=0.5)
    experiment.refresh_from_db()
    assert experiment.progress == 0.0  # the searcher's: no trial has ended yet

    lifecycle.trial_run_exited(trial_id=first.id, run_id=1, exit_code=0)
    experiment.refresh_from_db()
    assert experiment.state == State.ACTIVE and experiment.progress == pytest.approx(1 / 3)
    third = trials_of(experiment)[2]
    assert third.request_id == "3" and current_run(third).state == RunState.QUEUED
    assert 1e-3 <= third.hparams["lr"] <= 1e-1 and third.hparams["global_batch_size"] == 8

    lifecycle.trial_run_exited(trial_id=second.id, run_id=1, exit_code=0)
    experiment.refresh_from_db()
    assert len(trials_of(experiment)) == 3  # max_trials reached: no fourth trial
    assert experiment.state == State.ACTIVE and experiment.progress == pytest.approx(2 / 3)

    finish(third)
    experiment.refresh_from_db()
    assert experiment.state == State.COMPLETED and experiment.progress == 1.0
    assert experiment.searcher_state == {
        "created": 3,
        "ended": ["1", "2", "3"],
        "invalid": [],
        "shutdown": True,
    }


def test_a_grid_search_creates_one_trial_per_point(api):
    config = RANDOM_CONFIG.replace("name: random", "name: grid").replace(
        "maxval: -1}", "maxval: -1, count: 3}"
    )
    experiment = random_experiment(api, config.replace("  max_trials: 3\n", ""))
    assert len(trials_of(experiment)) == 2
    for trial in trials_of(experiment):
        finish(trial)
    finish(trials_of(experiment)[2])
    experiment.refresh_from_db()
    lrs = [trial.hparams["lr"] for trial in trials_of(experiment)]
    assert lrs == pytest.approx([1e-3, 1e-2, 1e-1])
    assert experiment.state == State.COMPLETED and experiment.progress == 1.0


def test_a_failed_trial_counts_towards_max_trials_and_is_followed_by_the_next(api):
    experiment = random_experiment(api)
    experiment.config["max_restarts"] = 0
    experiment.save()
    first, second = trials_of(experiment)
    finish(first, exit_code=1)
    assert reload(first).state == State.ERROR
    third = trials_of(experiment)[2]
    finish(second)
    finish(third)
    experiment.refresh_from_db()
    assert len(trials_of(experiment)) == 3 and experiment.state == State.COMPLETED


def test_a_stopping_experiment_creates_no_more_trials(api):
    experiment = random_experiment(api)
    lifecycle.experiment_cancel(experiment_id=experiment.id)  # queued runs: they end at once
    experiment.refresh_from_db()
    assert len(trials_of(experiment)) == 2
    assert experiment.state == State.CANCELED
    assert {trial.state for trial in trials_of(experiment)} == {State.CANCELED}


def test_a_trial_created_while_the_experiment_is_paused_waits_paused(api):
    experiment = random_experiment(api)
    first, _ = trials_of(experiment)
    lifecycle.experiment_pause(experiment_id=experiment.id)
    lifecycle.trial_cancel(trial_id=first.id)  # the searcher asks for trial 3 now
    third = trials_of(experiment)[2]
    assert third.state == State.PAUSED and third.run_id == 0
    experiment.refresh_from_db()
    assert experiment.state == State.PAUSED
    lifecycle.experiment_activate(experiment_id=experiment.id)
    assert reload(third).state == State.ACTIVE and current_run(third).state == RunState.QUEUED


def test_later_trials_of_a_search_warm_start_like_the_first(api, trial):
    checkpoint = register_checkpoint(trial, "00000000-0000-0000-0000-0000000000cc")
    config = RANDOM_CONFIG.replace(
        "max_trials: 3", f"max_trials: 3\n  source_checkpoint_uuid: {checkpoint.uuid}"
    )
    experiment = random_experiment(api, config)
    finish(trials_of(experiment)[0])
    warm = {str(t.warm_start_checkpoint) for t in trials_of(experiment)}
    assert len(trials_of(experiment)) == 3 and warm == {str(checkpoint.uuid)}


def test_continue_a_trial_of_a_random_search(api, user):
    experiment = random_experiment(api)
    first = trials_of(experiment)[0]
    finish(first)
    register_checkpoint(first, "00000000-0000-0000-0000-0000000000dd")
    continued = lifecycle.trial_continue(trial_id=first.id, owner=user)
    assert continued.config["searcher"]["name"] == "single"
    assert "max_trials" not in continued.config["searcher"]
    (trial,) = continued.trials.all()
    assert trial.hparams == reload(first).hparams
