"""``/api/v1/unmanaged/``: starting, heartbeating and ending unmanaged runs over REST, and the
controls that do and do not apply to them (the SDK's side: tests/headway/experimental/)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from registry.models import Experiment, RunState, State, StopReason, Trial, TrialRun

pytestmark = pytest.mark.django_db

START = "/api/v1/unmanaged/"


def _run_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _start(api, **body):
    return api.post(START, {"config": {"name": "u"}, **body}, format="json")


def test_a_start_answers_the_run_to_report_as(api) -> None:
    answer = _start(api, hparams={"lr": 0.1})
    assert answer.status_code == 201, answer.json()
    data = answer.json()
    trial = Trial.objects.select_related("experiment").get(id=data["trial_id"])
    assert trial.experiment.unmanaged and trial.experiment.model_definition_size == 0
    assert data["run_id"] == 1 and not data["resumed"] and data["hparams"] == {"lr": 0.1}
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert run.state == RunState.RUNNING and run.token == data["token"] and run.heartbeat_at is None
    assert data["heartbeat_interval_s"] > 0
    # The run token reports like a managed run's: its own trial only, and not another start.
    run_api = _run_client(data["token"])
    url = f"/api/v1/trials/{trial.id}/metrics/"
    body = {"reports": [{"group": "training", "steps_completed": 1, "metrics": {"loss": 1.0}}]}
    assert run_api.post(url, body, format="json").status_code == 200
    assert _start(run_api).status_code == 403
    beat = run_api.post(f"/api/v1/unmanaged/trials/{trial.id}/runs/1/heartbeat/")
    assert beat.status_code == 200 and beat.json() == {"stop_requested": ""}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"config": "name: u"}, "config"),
        ({"config": {"entrypoint": "python train.py"}}, "config.entrypoint"),
        ({"config": {"resources": {"slots_per_trial": 2}}}, "config.resources"),
        (
            {"config": {"searcher": {"name": "single", "max_length": 10}}},
            "config.searcher.max_length",
        ),
        (
            {"config": {"checkpoint_storage": {"location": "elsewhere"}}},
            "config.checkpoint_storage",
        ),
        (
            {"config": {"checkpoint_storage": {"type": "shared_fs", "host_path": "/etc"}}},
            "config.checkpoint_storage",
        ),
        ({"config": {}, "external_trial_id": "t"}, "external_trial_id"),
        ({"config": {}, "external_experiment_id": "e" * 300}, "external_experiment_id"),
        ({"config": {}, "hparams": [1, 2]}, "hparams"),
        ({"config": {}, "external_id": "x"}, "external_id"),
        ({"config": {}, "hparams": {"name": "a\u0000b"}}, "hparams"),
        ({"config": {}, "external_experiment_id": "a\u0000b"}, "external_experiment_id"),
        ({"config": {"name": "a\u0000b"}}, "config"),
    ],
)
def test_a_bad_start_is_a_400_naming_the_field(api, body, field) -> None:
    answer = api.post(START, body, format="json")
    assert answer.status_code == 400, answer.json()
    assert any(key.startswith(field) for key in answer.json()["errors"]), answer.json()
    assert not Experiment.objects.exists()


def test_the_same_external_ids_resume_the_trial_and_supersede_its_live_run(api) -> None:
    ids = {"external_experiment_id": "e", "external_trial_id": "t"}
    first = _start(api, **ids).json()
    second = _start(api, **ids).json()
    assert second["trial_id"] == first["trial_id"] and second["resumed"]
    assert second["run_id"] == first["run_id"] + 1
    old = TrialRun.objects.get(trial_id=first["trial_id"], run_id=first["run_id"])
    assert old.state == RunState.EXITED
    # The superseded run's token is refused; its late exit changes nothing.
    assert (
        _run_client(first["token"])
        .post(
            f"/api/v1/unmanaged/trials/{first['trial_id']}/runs/{first['run_id']}/exit/",
            {"exit_code": 1},
            format="json",
        )
        .status_code
        == 401
    )
    assert Trial.objects.get(id=first["trial_id"]).state == State.ACTIVE


def test_pause_and_activate_are_refused_kill_asks_the_script_to_stop(api) -> None:
    data = _start(api).json()
    trial_id, run_api = data["trial_id"], _run_client(data["token"])
    answer = api.post(f"/api/v1/trials/{trial_id}/pause/")
    assert answer.status_code == 409 and "unmanaged" in answer.json()["detail"]
    assert api.post(f"/api/v1/experiments/{data['experiment_id']}/pause/").status_code == 409
    assert Trial.objects.get(id=trial_id).state == State.ACTIVE
    assert api.post(f"/api/v1/trials/{trial_id}/kill/").status_code == 200
    beat = run_api.post(f"/api/v1/unmanaged/trials/{trial_id}/runs/1/heartbeat/")
    assert beat.json() == {"stop_requested": StopReason.KILL}
    ended = run_api.post(
        f"/api/v1/unmanaged/trials/{trial_id}/runs/1/exit/", {"exit_code": 0}, format="json"
    )
    assert ended.status_code == 200 and ended.json() == {"trial_state": State.CANCELED}


def test_a_managed_run_is_not_an_unmanaged_one(api, trial) -> None:
    url = f"/api/v1/unmanaged/trials/{trial.id}/runs/{trial.run_id}/exit/"
    assert api.post(url, {"exit_code": 0}, format="json").status_code == 404
    assert Trial.objects.get(id=trial.id).state == State.ACTIVE
