"""Body fields whose JSON type the schema fixes take that type only: DRF's UUID and float
fields and pydantic's lax date-time also took booleans, integers or numeric strings, so
``"uuid": false`` was stored as the zero UUID (fuzzing, schemathesis ST201)."""

from __future__ import annotations

import uuid

import pytest

from tests.registry.api.test_api_audit_findings import assert_400_naming

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", [False, 0, 12345])
def test_a_checkpoint_uuid_that_is_not_a_string_is_400(api, trial, value):
    body = {"uuid": value, "steps_completed": 1, "resources": {}}
    response = api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert_400_naming(response, "uuid")
    assert not trial.checkpoints.exists()
    body["uuid"] = str(uuid.uuid4())
    assert (
        api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json").status_code == 201
    )


@pytest.mark.parametrize("value", [False, True, "0.5"])
def test_progress_that_is_not_a_number_is_400(api, trial, value):
    url = f"/api/v1/trials/{trial.id}/progress/"
    assert_400_naming(api.post(url, {"progress": value}, format="json"), "progress")
    assert api.post(url, {"progress": 0.5}, format="json").status_code == 200


@pytest.mark.parametrize("value", [0, 1767225600, 1.5])
def test_a_report_timestamp_that_is_a_number_is_400(api, trial, value):
    report = {"group": "training", "steps_completed": 1, "metrics": {"loss": 1.0}}
    url = f"/api/v1/trials/{trial.id}/metrics/"
    answer = api.post(url, {"reports": [{**report, "timestamp": value}]}, format="json")
    assert_400_naming(answer, "reports[0].timestamp")
    stamped = {**report, "timestamp": "2026-01-01T00:00:00Z"}
    assert api.post(url, {"reports": [stamped]}, format="json").status_code == 200


def test_a_report_with_a_field_the_schema_does_not_name_is_400(api, trial):
    report = {"group": "training", "steps_completed": 1, "metrics": {"loss": 1.0}, "step": 1}
    answer = api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": [report]}, format="json")
    assert_400_naming(answer, "reports[0].step")
