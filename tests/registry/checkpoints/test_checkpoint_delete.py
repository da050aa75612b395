"""``DELETE checkpoints/{uuid}/`` and ``DELETE experiments/{id}/`` (REST and CLI): who may,
what is refused (409 naming the model or the trial), files really gone, rows gone."""

from __future__ import annotations

import os
import uuid

import pytest
import requests

from headway.cli.main import main
from headway.storage import build_storage_manager
from registry.lifecycle import experiment_delete_run
from registry.models import (
    Checkpoint,
    CheckpointState,
    Experiment,
    MetricReport,
    ModelVersion,
    RegisteredModel,
    State,
    Trial,
    TrialLog,
)
from tests.helpers import b64, reload
from tests.helpers_checkpoints import end_trial, retention_experiment, stored_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def storage(tmp_path) -> dict:
    # Retention keeps everything here: these tests delete by hand.
    return {"type": "shared_fs", "host_path": str(tmp_path / "ckpts"), "save_trial_latest": 100}


@pytest.fixture
def bob(django_user_model):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    user = django_user_model.objects.create_user("bob", password="bob-password")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    client.user = user
    return client


def _in_storage(checkpoint: Checkpoint) -> bool:
    return build_storage_manager(checkpoint.storage).exists(str(checkpoint.uuid))


def _register_model(checkpoint: Checkpoint, owner) -> ModelVersion:
    model = RegisteredModel.objects.create(name="digits-classifier", owner=owner)
    return ModelVersion.objects.create(model=model, version=1, checkpoint=checkpoint, owner=owner)


# -- one checkpoint ---------------------------------------------------------------------------------


def test_deleting_a_checkpoint_removes_its_files_and_keeps_a_deleted_row(api, storage):
    trial = retention_experiment(api, storage)
    old = stored_checkpoint(trial, steps=1)
    stored_checkpoint(trial, steps=2)
    assert _in_storage(old)
    response = api.delete(f"/api/v1/checkpoints/{old.uuid}/")
    assert response.status_code == 204, response.content
    assert reload(old).state == CheckpointState.DELETED and not _in_storage(old)
    # Idempotent, and the row still answers.
    assert api.delete(f"/api/v1/checkpoints/{old.uuid}/").status_code == 204
    assert api.get(f"/api/v1/checkpoints/{old.uuid}/").json()["state"] == "DELETED"


def test_unknown_or_malformed_uuids_are_404(api):
    assert api.delete(f"/api/v1/checkpoints/{uuid.uuid4()}/").status_code == 404
    assert api.delete("/api/v1/checkpoints/not-a-uuid/").status_code == 404


def test_only_the_owner_or_staff_may_delete_a_checkpoint(api, bob, storage):
    trial = retention_experiment(api, storage)
    old = stored_checkpoint(trial, steps=1)
    stored_checkpoint(trial, steps=2)
    response = bob.delete(f"/api/v1/checkpoints/{old.uuid}/")
    assert response.status_code == 403 and "owner" in response.json()["detail"]
    assert _in_storage(old)
    bob.user.is_staff = True
    bob.user.save()
    assert bob.delete(f"/api/v1/checkpoints/{old.uuid}/").status_code == 204


def test_a_trial_token_may_not_delete_checkpoints(api, storage):
    from tests.helpers import start_run

    trial = retention_experiment(api, storage)
    checkpoint = stored_checkpoint(trial, steps=1)
    run = start_run(trial)
    api.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    response = api.delete(f"/api/v1/checkpoints/{checkpoint.uuid}/")
    assert response.status_code == 403
    assert _in_storage(checkpoint)


def test_a_checkpoint_held_by_a_model_version_is_409_naming_it(api, user, storage):
    trial = retention_experiment(api, storage)
    held = stored_checkpoint(trial, steps=1)
    stored_checkpoint(trial, steps=2)
    _register_model(held, user)
    response = api.delete(f"/api/v1/checkpoints/{held.uuid}/")
    assert response.status_code == 409
    assert "digits-classifier v1" in response.json()["detail"]
    assert reload(held).state == CheckpointState.COMPLETED and _in_storage(held)


def test_the_latest_checkpoint_of_a_running_trial_is_409(api, storage):
    trial = retention_experiment(api, storage)
    latest = stored_checkpoint(trial, steps=3)
    response = api.delete(f"/api/v1/checkpoints/{latest.uuid}/")
    assert response.status_code == 409
    assert f"latest checkpoint of trial {trial.id}" in response.json()["detail"]
    end_trial(trial)
    assert api.delete(f"/api/v1/checkpoints/{latest.uuid}/").status_code == 204


def test_a_storage_failure_is_502_and_delete_failed(api, storage):
    trial = retention_experiment(api, storage)
    old = stored_checkpoint(trial, steps=1)
    stored_checkpoint(trial, steps=2)
    Checkpoint.objects.filter(uuid=old.uuid).update(
        storage={"type": "shared_fs", "host_path": "relative"}
    )
    response = api.delete(f"/api/v1/checkpoints/{old.uuid}/")
    assert response.status_code == 502 and "DELETE_FAILED" in response.json()["detail"]
    assert reload(old).state == CheckpointState.DELETE_FAILED


def test_a_deleted_checkpoint_cannot_be_continued_from(api, storage):
    trial = retention_experiment(api, storage)
    old = stored_checkpoint(trial, steps=1)
    stored_checkpoint(trial, steps=2)
    end_trial(trial)
    assert api.delete(f"/api/v1/checkpoints/{old.uuid}/").status_code == 204
    response = api.post(
        f"/api/v1/trials/{trial.id}/continue/", {"checkpoint": str(old.uuid)}, format="json"
    )
    assert response.status_code == 400 and "DELETED" in response.json()["errors"]["checkpoint"][0]


# -- experiments --------------------------------------------------------------------------------------


def test_deleting_a_running_experiment_is_409(api, storage):
    trial = retention_experiment(api, storage)
    response = api.delete(f"/api/v1/experiments/{trial.experiment_id}/")
    assert response.status_code == 409 and "ACTIVE" in response.json()["detail"]
    assert reload(trial.experiment).state == State.ACTIVE


def test_deleting_an_experiment_holding_a_registered_checkpoint_is_409_naming_the_model(
    api, user, storage
):
    trial = retention_experiment(api, storage)
    _register_model(stored_checkpoint(trial, steps=1), user)
    end_trial(trial)
    response = api.delete(f"/api/v1/experiments/{trial.experiment_id}/")
    assert response.status_code == 409
    assert "digits-classifier v1" in response.json()["detail"]
    assert reload(trial.experiment).state == State.COMPLETED


def test_only_the_owner_may_delete_an_experiment_and_unknown_ids_are_404(api, bob, storage):
    trial = retention_experiment(api, storage)
    end_trial(trial)
    assert bob.delete(f"/api/v1/experiments/{trial.experiment_id}/").status_code == 403
    assert api.delete("/api/v1/experiments/999999/").status_code == 404
    assert reload(trial.experiment).state == State.COMPLETED


def test_deleting_an_ended_experiment_removes_files_then_rows(api, storage):
    trial = retention_experiment(api, storage)
    checkpoints = [
        stored_checkpoint(trial, steps=s, validation={"validation_loss": 1.0 / s}) for s in (1, 2)
    ]
    TrialLog.objects.create(trial=trial, message="hello")
    end_trial(trial)
    experiment_id = trial.experiment_id

    response = api.delete(f"/api/v1/experiments/{experiment_id}/")
    assert response.status_code == 202 and response.json()["state"] == "DELETING"
    # Hidden from the default list while it is being deleted, shown when asked by state.
    listed = [e["id"] for e in api.get("/api/v1/experiments/").json()["results"]]
    assert experiment_id not in listed
    by_state = api.get("/api/v1/experiments/", {"state": "DELETING"}).json()["results"]
    assert [e["id"] for e in by_state] == [experiment_id]
    # Deleting again while DELETING is a no-op; controls are refused.
    assert api.delete(f"/api/v1/experiments/{experiment_id}/").status_code == 202
    assert api.post(f"/api/v1/experiments/{experiment_id}/pause/").status_code == 409

    assert experiment_delete_run(experiment_id=experiment_id) is True

    assert not Experiment.objects.filter(id=experiment_id).exists()
    assert not Trial.objects.filter(id=trial.id).exists()
    assert not Checkpoint.objects.filter(trial_id=trial.id).exists()
    assert not MetricReport.objects.filter(trial_id=trial.id).exists()
    assert not TrialLog.objects.filter(trial_id=trial.id).exists()
    for checkpoint in checkpoints:
        assert not _in_storage(checkpoint)
    assert api.get(f"/api/v1/experiments/{experiment_id}/").status_code == 404
    # The task running again finds nothing to do.
    assert experiment_delete_run(experiment_id=experiment_id) is False


def test_a_failed_experiment_deletion_is_delete_failed_with_the_error_and_can_be_retried(
    api, storage
):
    trial = retention_experiment(api, storage)
    broken = stored_checkpoint(trial, steps=1)
    end_trial(trial)
    Checkpoint.objects.filter(uuid=broken.uuid).update(
        storage={"type": "shared_fs", "host_path": "relative"}
    )
    experiment_id = trial.experiment_id
    assert api.delete(f"/api/v1/experiments/{experiment_id}/").status_code == 202
    assert experiment_delete_run(experiment_id=experiment_id) is False
    body = api.get(f"/api/v1/experiments/{experiment_id}/").json()
    assert body["state"] == "DELETE_FAILED"
    assert str(broken.uuid) in body["delete_error"] and "host_path" in body["delete_error"]
    # DELETE_FAILED experiments stay listed: the user has to act.
    listed = [e["id"] for e in api.get("/api/v1/experiments/").json()["results"]]
    assert experiment_id in listed
    Checkpoint.objects.filter(uuid=broken.uuid).update(
        storage=trial.experiment.config["checkpoint_storage"]
    )
    assert api.delete(f"/api/v1/experiments/{experiment_id}/").status_code == 202
    assert experiment_delete_run(experiment_id=experiment_id) is True
    assert not Experiment.objects.filter(id=experiment_id).exists()


def test_the_dashboard_list_hides_experiments_being_deleted(api, client, user, storage):
    trial = retention_experiment(api, storage)
    end_trial(trial)
    client.force_login(user)
    assert f"/experiments/{trial.experiment_id}/" in client.get("/").content.decode()
    assert api.delete(f"/api/v1/experiments/{trial.experiment_id}/").status_code == 202
    assert f"/experiments/{trial.experiment_id}/" not in client.get("/").content.decode()


# -- CLI, against a live server -----------------------------------------------------------------------


@pytest.fixture
def server(live_server, transactional_db, django_user_model, monkeypatch, tmp_path):
    """The live server's URL with $HEADWAY_TOKEN set to a fresh user's token."""
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_user("dora", password="pw-dora")
    monkeypatch.setenv("HEADWAY_TOKEN", Token.objects.create(user=user).key)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return live_server.url


def _cli(server: str, capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["--master", server, *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_cli_deletes_a_checkpoint_and_an_experiment(server, storage, capsys, monkeypatch):
    from tests.helpers import TINY_MODEL

    config = {
        "name": "cli-delete",
        "entrypoint": "model_def:TinyTrial",
        "hyperparameters": {"global_batch_size": 8},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": 10},
        "checkpoint_storage": storage,
    }
    answer = requests.post(
        f"{server}/api/v1/experiments/",
        json={"config": config, "model_definition": b64(TINY_MODEL)},
        headers={"Authorization": f"Token {os.environ['HEADWAY_TOKEN']}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    experiment_id = answer.json()["id"]
    trial = Trial.objects.get(experiment_id=experiment_id)
    old = stored_checkpoint(trial, steps=1, validation={"validation_loss": 0.5})
    latest = stored_checkpoint(trial, steps=2)

    code, out, err = _cli(server, capsys, "checkpoint", "delete", str(latest.uuid))
    assert code == 1 and f"latest checkpoint of trial {trial.id}" in err
    assert _cli(server, capsys, "checkpoint", "delete", str(old.uuid)) == (
        0,
        f"Checkpoint {old.uuid}: DELETED",
        "",
    )
    assert not _in_storage(old)
    code, out, _ = _cli(server, capsys, "checkpoint", "list", str(experiment_id))
    assert code == 0 and "searcher_metric" in out and "latest" in out and "DELETED" in out

    code, _, err = _cli(server, capsys, "experiment", "delete", str(experiment_id), "--yes")
    assert code == 1 and "ACTIVE" in err
    end_trial(trial)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    code, _, err = _cli(server, capsys, "experiment", "delete", str(experiment_id))
    assert code == 1 and "aborted" in err
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    code, out, _ = _cli(server, capsys, "experiment", "delete", str(experiment_id))
    assert (code, out) == (0, f"Experiment {experiment_id}: DELETING")
