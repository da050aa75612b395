"""REST reads of the metric store: windows, live polls, experiment overviews, CSV export, CLI."""

from __future__ import annotations

import csv
import io
import math

import pytest

from headway.cli.main import main
from registry.models import Trial
from tests.helpers import create_experiment

pytestmark = pytest.mark.django_db


def post(api, trial, reports):
    response = api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": reports}, format="json")
    assert response.status_code == 200, response.content
    return response


def training(step, **metrics):
    return {"group": "training", "steps_completed": step, "metrics": metrics}


def series(api, trial, **params):
    response = api.get(f"/api/v1/trials/{trial.id}/metrics/", params)
    assert response.status_code == 200, response.content
    return response.json()["series"]


def test_a_zoom_window_and_a_live_poll(api, trial):
    post(api, trial, [training(s, loss=math.sin(s / 50)) for s in range(1, 3001)])
    (whole,) = series(api, trial, name="loss", max_points=100)
    assert whole["downsampled"] and len(whole["steps"]) <= 100 and whole["count"] == 3000
    (zoom,) = series(api, trial, name="loss", x_min=1000, x_max=1080, max_points=100)
    assert zoom["steps"] == list(range(1000, 1081)) and not zoom["downsampled"]
    (poll,) = series(api, trial, name="loss", after_step=whole["last_step"])
    assert poll["steps"] == [] and poll["last_step"] == 3000
    post(api, trial, [training(3001, loss=9.0)])
    (poll,) = series(api, trial, name="loss", after_step=3000)
    assert (poll["steps"], poll["values"]) == ([3001], [9.0])


def test_several_names_and_the_epoch_axis(api, trial):
    post(
        api,
        trial,
        [{**training(s, loss=1.0, lr=0.1), "epoch": s / 10} for s in range(1, 21)],
    )
    got = series(api, trial, name=["loss", "lr"], x_axis="epochs")
    assert [s["name"] for s in got] == ["loss", "lr"]
    assert got[0]["epochs"] == [s / 10 for s in range(1, 21)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"x_min": 10, "x_max": 5}, "x_max"),
        ({"x_min": "a"}, "x_min"),
        ({"after_step": -5}, "after_step"),
        ({"x_axis": "steps"}, "x_axis"),
        ({"max_points": 2}, "max_points"),
    ],
)
def test_bad_parameters_are_named(api, trial, params, field):
    response = api.get(f"/api/v1/trials/{trial.id}/metrics/", params)
    assert response.status_code == 400 and field in response.json()["errors"]


def test_the_experiment_endpoint_returns_one_series_per_trial(api):
    experiment_id = create_experiment(api).json()["id"]
    trial = Trial.objects.get(experiment_id=experiment_id)
    post(api, trial, [training(s, loss=1 / s) for s in range(1, 500)])
    answer = api.get(f"/api/v1/experiments/{experiment_id}/metrics/", {"name": "loss"}).json()
    assert answer["experiment_id"] == experiment_id
    (entry,) = answer["series"]
    assert entry["trial_id"] == trial.id and len(entry["steps"]) <= 100
    assert entry["steps"][0] == 1 and entry["steps"][-1] == 499
    other = api.get(f"/api/v1/experiments/{experiment_id}/metrics/", {"trial_id": 10**6})
    assert other.json()["series"] == []
    bad = api.get(f"/api/v1/experiments/{experiment_id}/metrics/", {"trial_id": "x"})
    assert bad.status_code == 400 and "trial_id" in bad.json()["errors"]


def test_csv_export_streams_every_stored_value(api, trial):
    post(api, trial, [training(1, loss=0.5, note="warmup"), training(2, loss="NaN")])
    post(api, trial, [{"group": "validation", "steps_completed": 2, "metrics": {"acc": 0.9}}])
    response = api.get(f"/api/v1/trials/{trial.id}/metrics.csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == [
        "group",
        "name",
        "steps_completed",
        "value",
        "epoch",
        "reported_at",
        "run_id",
    ]
    assert [r[:4] for r in rows[1:]] == [
        ["training", "loss", "1", "0.5"],
        ["training", "note", "1", "warmup"],
        ["training", "loss", "2", "NaN"],
        ["validation", "acc", "2", "0.9"],
    ]
    only = api.get(f"/api/v1/trials/{trial.id}/metrics.csv", {"group": "validation"})
    assert len(b"".join(only.streaming_content).decode().splitlines()) == 2
    assert api.get("/api/v1/trials/999999/metrics.csv").status_code == 404


def test_a_trial_token_cannot_export(api, trial):
    from rest_framework.test import APIClient

    run = trial.runs.get()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    assert client.get(f"/api/v1/trials/{trial.id}/metrics.csv").status_code == 403


@pytest.fixture
def cli_server(live_server, transactional_db, django_user_model, monkeypatch, tmp_path):
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_user("erin", password="pw-erin")
    token = Token.objects.create(user=user).key
    monkeypatch.setenv("HEADWAY_TOKEN", token)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HEADWAY_MASTER", live_server.url)
    return token


def test_the_cli_exports_csv_and_prints_a_summary(cli_server, tmp_path, capsys):
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {cli_server}")
    trial = Trial.objects.get(experiment_id=create_experiment(api).json()["id"])
    post(api, trial, [training(s, loss=s / 10) for s in range(1, 6)])
    out = tmp_path / "m.csv"
    assert main(["trial", "metrics", str(trial.id), "--csv", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 6 and lines[-1].startswith("training,loss,5,0.5,")
    assert main(["trial", "metrics", str(trial.id)]) == 0
    table = capsys.readouterr().out
    assert "loss" in table and "0.5" in table
    assert main(["trial", "metrics", str(trial.id), "-o", str(out)]) == 2


def test_the_experiment_endpoint_query_count_does_not_grow_with_trials(
    api, django_assert_max_num_queries
):
    experiment_id = create_experiment(api).json()["id"]
    url = f"/api/v1/experiments/{experiment_id}/metrics/"

    def add(n):
        for i in range(n):
            trial = Trial.objects.create(experiment_id=experiment_id, hparams={"i": i})
            post(api, trial, [training(s, loss=s * (i + 1), lr=0.1) for s in range(1, 400)])

    add(2)
    with django_assert_max_num_queries(20) as few:
        assert len(api.get(url).json()["series"]) == 4
        queries = len(few.captured_queries)  # read now: each request resets Django's log
    add(6)
    with django_assert_max_num_queries(queries):
        assert len(api.get(url).json()["series"]) == 16
