"""The client's typed rows of trials and checkpoints are the registry's serializer rows: the same
fields in the same order, and a real answer reads into them and back unchanged."""

from __future__ import annotations

import pytest

from headway.client import wire
from registry.api.serializers import CheckpointSerializer, TrialSerializer
from tests.helpers import create_experiment, register_checkpoint


@pytest.mark.parametrize(
    ("row", "serializer"),
    [(wire.TrialRow, TrialSerializer), (wire.CheckpointRow, CheckpointSerializer)],
)
def test_a_wire_rows_fields_are_its_serializers_fields_in_order(row, serializer) -> None:
    assert list(row.model_fields) == list(serializer.Meta.fields)


@pytest.mark.parametrize("row", [wire.TrialRow, wire.CheckpointRow])
def test_the_fields_a_cli_summary_shows_are_fields_of_the_row(row) -> None:
    assert set(row.SUMMARY_FIELDS) <= set(row.model_fields)


@pytest.mark.django_db
def test_the_registrys_answers_read_into_the_rows_and_back_as_sent(django_user_model) -> None:
    from rest_framework.test import APIClient

    from registry.models import Trial

    api = APIClient()
    api.force_authenticate(django_user_model.objects.create_user("wren"))
    experiment_id = create_experiment(api).json()["id"]
    trial = Trial.objects.get(experiment_id=experiment_id)
    reports = [
        {"group": "training", "steps_completed": 10, "metrics": {"loss": 0.5}},
        {"group": "validation", "steps_completed": 10, "metrics": {"validation_loss": 0.25}},
    ]
    answer = api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": reports}, format="json")
    assert answer.status_code == 200, answer.content
    checkpoint = register_checkpoint(trial, steps_completed=10)

    sent = api.get(f"/api/v1/trials/{trial.id}/").json()
    row = wire.TrialRow.model_validate(sent)
    assert (row.id, row.experiment_id, row.steps_completed) == (trial.id, experiment_id, 10)
    assert row.summary_metrics["validation"]["validation_loss"]["last"] == 0.25
    assert row.as_sent() == sent

    page = api.get("/api/v1/trials/", {"limit": 1}).json()
    assert wire.TrialPage.model_validate(page).as_sent() == page

    (sent,) = api.get(f"/api/v1/trials/{trial.id}/checkpoints/").json()["results"]
    row = wire.CheckpointRow.model_validate(sent)
    assert (row.uuid, row.trial_id, row.searcher_metric) == (str(checkpoint.uuid), trial.id, 0.25)
    assert row.as_sent() == sent
    assert wire.CheckpointRow.model_validate(sent | {"added_later": [1]}).as_sent() == sent | {
        "added_later": [1]
    }
