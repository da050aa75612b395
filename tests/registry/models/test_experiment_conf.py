"""``Experiment.conf`` (the stored config, validated once per instance), the
``StoredConfigInvalid`` error it raises and how the scheduler, the lifecycle, the REST API and
the dashboard report it; ``Experiment.objects.without_blobs()`` / ``blob_fields()``; the
``StopReason`` values written on stop requests."""

from __future__ import annotations

import pytest
from django.db import transaction

from headway.expconf import ExperimentConfig, parse_experiment_config
from registry import lifecycle
from registry.errors import StoredConfigInvalid
from registry.models import Experiment, State, StopReason, Trial, TrialRun, blob_fields
from registry.models.experiment import BLOB_FIELDS
from registry.scheduling import schedule_run
from tests.helpers import create_experiment, reload, start_run

pytestmark = pytest.mark.django_db


def _break(experiment_id: int, field: str, value: object) -> None:
    """Store ``config[field] = value`` as an older version might have: no validation."""
    experiment = Experiment.objects.get(id=experiment_id)
    experiment.config[field] = value
    experiment.save(update_fields=["config"])


def test_conf_is_the_validated_stored_config_parsed_once(trial):
    experiment = Experiment.objects.get(id=trial.experiment_id)
    conf = experiment.conf
    assert isinstance(conf, ExperimentConfig)
    assert conf == parse_experiment_config(experiment.config)
    assert conf.searcher.metric == experiment.searcher_metric == "validation_loss"
    assert experiment.conf is conf  # cached on the instance


def test_an_invalid_stored_config_raises_the_named_error(trial):
    _break(trial.experiment_id, "max_restarts", -1)
    experiment = Experiment.objects.get(id=trial.experiment_id)
    with pytest.raises(StoredConfigInvalid) as caught:
        _ = experiment.conf
    error = caught.value
    assert error.experiment_id == experiment.id and error.status == 409
    assert "config.max_restarts" in error.errors
    assert f"experiment {experiment.id}" in error.detail and "max_restarts" in error.detail


def test_the_rest_api_answers_409_naming_the_field(api, trial):
    _break(trial.experiment_id, "searcher", {"name": "single", "metric": ""})
    response = api.get(f"/api/v1/experiments/{trial.experiment_id}/")
    assert response.status_code == 409
    body = response.json()
    assert "config.searcher.metric" in body["errors"]
    assert f"experiment {trial.experiment_id}" in body["detail"]


def test_the_dashboard_page_answers_409_naming_the_field(client, user, trial):
    _break(trial.experiment_id, "max_restarts", -1)
    client.force_login(user)
    response = client.get(f"/experiments/{trial.experiment_id}/")
    assert response.status_code == 409
    assert "max_restarts" in response.content.decode()


def test_a_queued_run_of_an_invalid_config_waits_with_the_reason(trial):
    # Not a resources field: the whole stored config is checked, not only ``resources``.
    lifecycle.trial_pause(trial_id=trial.id)  # drops its queued run
    _break(trial.experiment_id, "max_restarts", -1)
    Trial.objects.filter(id=trial.id).update(state=State.ACTIVE)
    with transaction.atomic():
        schedule_run(Trial.objects.select_for_update().get(id=trial.id))
    run = TrialRun.objects.get(trial=trial, run_id=reload(trial).run_id)
    assert run.slots_needed is None  # never placed with the schema's defaults
    message = reload(trial).scheduling_message
    assert message.startswith("not placed") and "max_restarts" in message


def test_a_failed_run_of_an_invalid_config_is_refused_not_restarted_with_defaults(trial):
    run = start_run(trial)
    _break(trial.experiment_id, "max_restarts", -1)
    with pytest.raises(StoredConfigInvalid) as caught:  # answered 409 to the worker
        lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=1)
    assert "config.max_restarts" in caught.value.errors
    # Nothing was decided with a guessed max_restarts: the exit was not recorded.
    assert reload(trial).state == State.ACTIVE and trial.restarts == 0
    assert TrialRun.objects.get(id=run.id).exit_code is None


def test_without_blobs_defers_the_large_columns(trial):
    experiment = Experiment.objects.without_blobs().get(id=trial.experiment_id)
    assert experiment.get_deferred_fields() == set(BLOB_FIELDS)
    kept = Experiment.objects.without_blobs(keep=["original_config"]).get(id=trial.experiment_id)
    assert kept.get_deferred_fields() == set(BLOB_FIELDS) - {"original_config"}
    # Through a relation: the same columns behind the lookup prefix.
    row = Trial.objects.select_related("experiment").defer(*blob_fields("experiment__"))
    assert row.get(id=trial.id).experiment.get_deferred_fields() == set(BLOB_FIELDS)


def test_stop_requests_are_written_as_stop_reasons(api, trial):
    run = start_run(trial)
    lifecycle.trial_pause(trial_id=trial.id)
    assert TrialRun.objects.get(id=run.id).stop_requested == StopReason.PAUSE
    assert lifecycle.trial_run_heartbeat(trial_id=trial.id, run_id=run.run_id) == "pause"
    lifecycle.trial_activate(trial_id=trial.id)
    assert TrialRun.objects.get(id=run.id).stop_requested == StopReason.NONE
    assert lifecycle.trial_run_preempt(trial_id=trial.id, run_id=run.run_id)
    assert TrialRun.objects.get(id=run.id).stop_requested == StopReason.PREEMPT
    other = reload(
        Trial.objects.get(experiment_id=create_experiment(api).json()["id"])
    )  # a second experiment's trial, to be killed while running
    killed = start_run(other)
    lifecycle.trial_kill(trial_id=other.id)
    assert TrialRun.objects.get(id=killed.id).stop_requested == StopReason.KILL
