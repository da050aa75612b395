"""The state changes that once were bulk UPDATEs send their events too: an unmanaged run
reopening its ended experiment (ACTIVE again) and an experiment deletion that failed
(DELETE_FAILED)."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from registry.lifecycle import experiment_delete_run
from registry.models import Checkpoint, Experiment, State
from tests.helpers_checkpoints import end_trial, retention_experiment, stored_checkpoint
from webhooks.models import Delivery, EventType, Webhook

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook() -> Webhook:
    return Webhook.objects.create(
        name="ops",
        url="https://hooks.example.com/headway",
        events=[EventType.EXPERIMENT_STATE_CHANGED],
        secret="s" * 32,
    )


def _changes(experiment_id: int) -> list[tuple[str, str]]:
    bodies = [
        json.loads(d.body)["data"]
        for d in Delivery.objects.filter(event_type=EventType.EXPERIMENT_STATE_CHANGED).order_by(
            "id"
        )
    ]
    return [
        (b["previous_state"], b["state"]) for b in bodies if b["experiment"]["id"] == experiment_id
    ]


def test_an_unmanaged_run_reopening_its_ended_experiment_sends_the_change(api, hook):
    ids = {"config": {"name": "u"}, "external_experiment_id": "e", "external_trial_id": "t"}
    first = api.post("/api/v1/unmanaged/", ids, format="json").json()
    run = APIClient()
    run.credentials(HTTP_AUTHORIZATION=f"Token {first['token']}")
    url = f"/api/v1/unmanaged/trials/{first['trial_id']}/runs/{first['run_id']}/exit/"
    assert run.post(url, {"exit_code": 0}, format="json").status_code == 200
    experiment_id = first["experiment_id"]
    assert Experiment.objects.get(id=experiment_id).state == State.COMPLETED
    assert _changes(experiment_id)[-1] == ("ACTIVE", "COMPLETED")

    again = api.post("/api/v1/unmanaged/", ids, format="json").json()

    assert again["resumed"] and again["experiment_id"] == experiment_id
    assert Experiment.objects.get(id=experiment_id).state == State.ACTIVE
    assert _changes(experiment_id)[-1] == ("COMPLETED", "ACTIVE")
    # A second start while it is ACTIVE changes nothing and sends nothing more.
    sent = len(_changes(experiment_id))
    api.post("/api/v1/unmanaged/", ids, format="json")
    assert len(_changes(experiment_id)) == sent


def test_a_failed_experiment_deletion_sends_deleting_then_delete_failed(api, hook, tmp_path):
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "ckpts"), "save_trial_latest": 9}
    trial = retention_experiment(api, storage)
    broken = stored_checkpoint(trial, steps=1)
    end_trial(trial)
    # A storage place that cannot be deleted from: the deletion fails.
    Checkpoint.objects.filter(uuid=broken.uuid).update(
        storage={"type": "shared_fs", "host_path": "relative"}
    )
    experiment_id = trial.experiment_id
    assert api.delete(f"/api/v1/experiments/{experiment_id}/").status_code == 202

    assert experiment_delete_run(experiment_id=experiment_id) is False

    experiment = Experiment.objects.get(id=experiment_id)
    assert experiment.state == State.DELETE_FAILED and str(broken.uuid) in experiment.delete_error
    assert _changes(experiment_id)[-2:] == [
        (_changes(experiment_id)[-2][0], "DELETING"),
        ("DELETING", "DELETE_FAILED"),
    ]
