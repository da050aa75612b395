"""Lifecycle transitions: controls, exit decisions, lost workers, continue trial, 409s."""

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.selectors import trial_actions
from registry import lifecycle
from registry.errors import IllegalTransition, InvalidInput
from registry.lifecycle import TRIAL_CONTROLS, check_control, legal_controls
from registry.models import Experiment, RunState, State, Trial, TrialRun
from tests.helpers import create_experiment, current_run, register_checkpoint, reload
from tests.helpers import start_run as start

pytestmark = pytest.mark.django_db


def test_a_run_is_claimed_once(trial):
    assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=1, worker="a") is not None
    assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=1, worker="b") is None


def test_exit_zero_completes_trial_and_experiment(trial):
    start(trial)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)
    assert reload(trial).state == State.COMPLETED and trial.progress == 1.0
    assert Experiment.objects.get(id=trial.experiment_id).state == State.COMPLETED
    # A retried exit report changes nothing.
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=1)
    assert reload(trial).state == State.COMPLETED and trial.restarts == 0


def test_failures_restart_until_max_restarts_then_error(trial):
    experiment = trial.experiment
    experiment.config["max_restarts"] = 2
    experiment.save()
    for expected_run in (1, 2, 3):
        run = start(reload(trial))
        assert run.run_id == expected_run
        lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=137)
    assert reload(trial).state == State.ERROR and trial.restarts == 2
    assert Experiment.objects.get(id=trial.experiment_id).state == State.ERROR


def test_pause_of_a_queued_trial_drops_the_run(trial):
    lifecycle.trial_pause(trial_id=trial.id)
    assert reload(trial).state == State.PAUSED
    assert current_run(trial).state == RunState.EXITED
    assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=1, worker="w") is None
    assert Experiment.objects.get(id=trial.experiment_id).state == State.PAUSED
    lifecycle.trial_activate(trial_id=trial.id)
    assert reload(trial).state == State.ACTIVE and trial.run_id == 2
    assert current_run(trial).state == RunState.QUEUED


def test_pause_acknowledge_exit_then_activate_resumes_as_next_run(trial):
    run = start(trial)
    lifecycle.trial_pause(trial_id=trial.id)
    assert current_run(trial).stop_requested == "pause"
    assert lifecycle.trial_preempt_acknowledge(trial_id=trial.id, run_id=run.run_id)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=0)
    assert reload(trial).state == State.PAUSED and trial.restarts == 0
    lifecycle.trial_activate(trial_id=trial.id)
    assert reload(trial).run_id == 2 and current_run(trial).state == RunState.QUEUED


def test_activate_before_the_paused_process_exits_resumes_once(trial):
    run = start(trial)
    lifecycle.trial_pause(trial_id=trial.id)
    lifecycle.trial_preempt_acknowledge(trial_id=trial.id, run_id=run.run_id)
    lifecycle.trial_activate(trial_id=trial.id)  # the process is still checkpointing
    assert reload(trial).run_id == 1
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)
    assert reload(trial).state == State.ACTIVE and trial.run_id == 2


def test_activate_withdraws_an_unacknowledged_pause(trial):
    start(trial)
    lifecycle.trial_pause(trial_id=trial.id)
    lifecycle.trial_activate(trial_id=trial.id)
    assert current_run(trial).stop_requested == "" and reload(trial).run_id == 1


def test_cancel_and_kill_end_canceled(api):
    first = Trial.objects.get(experiment_id=create_experiment(api).json()["id"])
    start(first)
    lifecycle.trial_cancel(trial_id=first.id)
    assert reload(first).state == State.STOPPING_CANCELED
    assert current_run(first).stop_requested == "cancel"
    lifecycle.trial_run_exited(trial_id=first.id, run_id=1, exit_code=0)
    assert reload(first).state == State.CANCELED

    second = Trial.objects.get(experiment_id=create_experiment(api).json()["id"])
    start(second)
    lifecycle.trial_kill(trial_id=second.id)
    assert reload(second).state == State.STOPPING_KILLED
    assert current_run(second).stop_requested == "kill"
    lifecycle.trial_run_exited(trial_id=second.id, run_id=1, exit_code=-15)
    assert reload(second).state == State.CANCELED and second.restarts == 0
    assert Experiment.objects.get(id=second.experiment_id).state == State.CANCELED


def test_illegal_transitions_name_the_current_state(trial):
    start(trial)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)
    for control in (lifecycle.trial_pause, lifecycle.trial_activate, lifecycle.trial_kill):
        with pytest.raises(IllegalTransition, match="is COMPLETED"):
            control(trial_id=trial.id)


def test_experiment_controls_reach_every_trial(trial):
    start(trial)
    lifecycle.experiment_pause(experiment_id=trial.experiment_id)
    assert reload(trial).state == State.PAUSED
    with pytest.raises(
        IllegalTransition, match="can be archived only when COMPLETED, CANCELED, ERROR"
    ):
        lifecycle.experiment_archive(experiment_id=trial.experiment_id)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)  # checkpointed, exited
    assert reload(trial).state == State.PAUSED
    lifecycle.experiment_kill(experiment_id=trial.experiment_id)  # no process left: ends at once
    experiment = Experiment.objects.get(id=trial.experiment_id)
    assert experiment.state == State.CANCELED and reload(trial).state == State.CANCELED
    assert lifecycle.experiment_archive(experiment_id=experiment.id).archived
    assert not lifecycle.experiment_unarchive(experiment_id=experiment.id).archived


def test_lost_worker_requeues_without_counting_a_restart(trial):
    start(trial)
    TrialRun.objects.filter(trial=trial).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    reaped = lifecycle.reap_lost_runs(timeout=timedelta(seconds=60))
    assert reaped == [(trial.id, 1)]
    assert reload(trial).run_id == 2 and trial.restarts == 0 and trial.state == State.ACTIVE
    assert TrialRun.objects.get(trial=trial, run_id=1).exit_code is None
    assert lifecycle.reap_lost_runs(timeout=timedelta(seconds=60)) == []


def test_continue_trial_needs_an_ended_trial_with_a_checkpoint(trial, user):
    with pytest.raises(IllegalTransition, match="is ACTIVE"):
        lifecycle.trial_continue(trial_id=trial.id, owner=user)
    start(trial)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)
    with pytest.raises(InvalidInput, match="no checkpoint"):
        lifecycle.trial_continue(trial_id=trial.id, owner=user)
    checkpoint = register_checkpoint(trial, "00000000-0000-0000-0000-000000000001")
    experiment = lifecycle.trial_continue(
        trial_id=trial.id, owner=user, max_length={"batches": 25}, hparams={"lr": 0.5}
    )
    (continued,) = experiment.trials.all()
    assert str(continued.warm_start_checkpoint) == str(checkpoint.uuid)
    assert continued.hparams["lr"] == 0.5
    assert continued.hparams["global_batch_size"] == trial.hparams["global_batch_size"]
    assert experiment.source_trial_id == trial.id
    assert experiment.config["searcher"]["max_length"] == {"batches": 25}
    assert bytes(experiment.model_definition) == bytes(trial.experiment.model_definition)


def test_control_endpoints_answer_409_with_the_state(api, trial):
    start(trial)
    assert api.post(f"/api/v1/trials/{trial.id}/pause").status_code == 200
    response = api.post(f"/api/v1/trials/{trial.id}/continue", {}, format="json")
    assert response.status_code == 400 and "no checkpoint" in response.json()["detail"]
    assert api.post(f"/api/v1/experiments/{trial.experiment_id}/pause").json()["state"] == "PAUSED"
    assert (
        api.post(f"/api/v1/experiments/{trial.experiment_id}/activate").json()["state"] == "ACTIVE"
    )
    assert api.post(f"/api/v1/experiments/{trial.experiment_id}/kill").status_code == 200
    response = api.post(f"/api/v1/trials/{trial.id}/activate")
    assert response.status_code == 409
    assert "STOPPING_KILLED" in response.json()["detail"]
    bad = api.post(
        f"/api/v1/trials/{trial.id}/continue", {"max_length": {"weeks": 2}}, format="json"
    )
    assert bad.status_code == 400 and "max_length" in bad.json()["errors"]


def test_preempt_endpoint_answers_and_acknowledges(api, trial):
    run = start(trial)
    api.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    url = f"/api/v1/trials/{trial.id}/preempt/"
    assert api.get(url, {"run_id": 1}).json() == {"should_preempt": False}
    lifecycle.trial_pause(trial_id=trial.id)
    assert api.get(url, {"run_id": 1, "timeout": 5}).json() == {"should_preempt": True}
    ack = api.post(f"/api/v1/trials/{trial.id}/preempt/ack/", {"run_id": 1}, format="json")
    assert ack.json() == {"acknowledged": True}
    assert current_run(trial).preempt_acknowledged


@pytest.mark.parametrize("metric", [0.25, "NaN", "-Infinity"])
def test_searcher_completed_accepts_non_finite_metrics(api, trial, metric):
    run = start(trial)
    api.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    response = api.post(
        f"/api/v1/trials/{trial.id}/searcher/completed/",
        {"length": 10, "metric": metric},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert reload(trial).searcher_completed_length == 10
    bad = api.post(
        f"/api/v1/trials/{trial.id}/searcher/completed/",
        {"length": 10, "metric": "x"},
        format="json",
    )
    assert bad.status_code == 400 and "metric" in bad.json()["errors"]


def test_a_config_can_name_the_checkpoint_or_trial_to_start_from(api, trial):
    checkpoint = register_checkpoint(trial, "00000000-0000-0000-0000-0000000000aa")
    by_trial = CONFIG_WITH_SOURCE.format(source=f"source_trial_id: {trial.id}")
    response = create_experiment(api, config=by_trial)
    assert response.status_code == 201, response.json()
    (started,) = Trial.objects.filter(experiment_id=response.json()["id"])
    assert str(started.warm_start_checkpoint) == str(checkpoint.uuid)
    missing = CONFIG_WITH_SOURCE.format(
        source="source_checkpoint_uuid: 00000000-0000-0000-0000-0000000000bb"
    )
    response = create_experiment(api, config=missing)
    assert response.status_code == 400
    assert "config.searcher.source_checkpoint_uuid" in response.json()["errors"]


CONFIG_WITH_SOURCE = """
name: warm
entrypoint: model_def:TinyTrial
searcher: {{name: single, metric: validation_loss, max_length: 10, {source}}}
"""


def test_worker_shutdown_preempts_without_overriding_a_users_stop(trial):
    start(trial)
    assert lifecycle.trial_run_preempt(trial_id=trial.id, run_id=1)
    assert current_run(trial).stop_requested == "preempt" and reload(trial).state == State.ACTIVE
    lifecycle.trial_preempt_acknowledge(trial_id=trial.id, run_id=1)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)
    assert reload(trial).state == State.ACTIVE and trial.run_id == 2  # resumes elsewhere
    run = start(reload(trial))
    lifecycle.trial_pause(trial_id=trial.id)
    assert not lifecycle.trial_run_preempt(trial_id=trial.id, run_id=run.run_id)
    assert current_run(trial).stop_requested == "pause"


def test_dashboard_offers_exactly_the_controls_the_lifecycle_accepts(trial):
    """Every state of the transition table: offered controls act, the others are refused."""
    for state in State:
        offered = set(legal_controls(TRIAL_CONTROLS, state))
        for control, rule in TRIAL_CONTROLS.items():
            if control in offered:
                assert check_control(TRIAL_CONTROLS, control, "trial 1", state) is True
            elif state in rule.no_op:
                assert check_control(TRIAL_CONTROLS, control, "trial 1", state) is False
            else:
                with pytest.raises(IllegalTransition, match=f"trial 1 is {state}"):
                    check_control(TRIAL_CONTROLS, control, "trial 1", state)
    trial.state = State.PAUSED
    assert trial_actions(trial) == ["activate", "cancel", "kill"]
