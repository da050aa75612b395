"""Dashboard pages, the live endpoint and the Plotly figure builder (Django test client, real DB)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from dashboard.charts import isolated_marker_sizes, metrics_figure, trace_name
from dashboard.selectors import flatten_hparams, format_length
from registry.metrics import metrics_report, parse_reports, read_series
from registry.models import Checkpoint, Experiment, State, Trial, TrialLog
from tests.helpers import DASHBOARD_CONFIG

CHECKPOINT_UUID = uuid.UUID("0f4b8a52-6a43-4f55-9d9c-3f3b2a1d0e77")


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="pw-alice")


@pytest.fixture
def client_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def experiment(alice):
    exp = Experiment.objects.create(
        owner=alice,
        name="digits-mlp",
        config=DASHBOARD_CONFIG,
        model_definition=b"",
        labels=["mnist-ish", "baseline"],
        progress=0.5,
        best_validation=0.91,
    )
    trial = Trial.objects.create(
        experiment=exp,
        hparams={"lr": 0.1, "optimizer": {"name": "sgd", "momentum": 0.9}},
        steps_completed=30,
        best_validation=0.91,
        latest_checkpoint=CHECKPOINT_UUID,
    )
    reports = [
        {"group": "training", "steps_completed": step, "metrics": {"loss": loss, "lr": 0.1}}
        for step, loss in [(10, 2.0), (20, "NaN"), (30, 0.5)]
    ]
    reports.append(
        {
            "group": "validation",
            "steps_completed": 30,
            "metrics": {"validation_accuracy": 0.91, "validation_loss": 0.4},
        }
    )
    metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))
    Checkpoint.objects.create(
        uuid=CHECKPOINT_UUID, trial=trial, steps_completed=30, size=3 * 1024 * 1024
    )
    TrialLog.objects.create(trial=trial, run_id=1, message="epoch 0 done")
    return exp


def test_it_lists_experiments(client_alice, experiment):
    response = client_alice.get(reverse("dashboard:experiments"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "digits-mlp" in html
    assert reverse("dashboard:experiment", args=[experiment.id]) in html
    assert "baseline" in html
    assert "validation_accuracy" in html
    assert "state-active" in html


def test_it_renders_the_experiment_page(client_alice, experiment):
    response = client_alice.get(reverse("dashboard:experiment", args=[experiment.id]))
    assert response.status_code == 200
    html = response.content.decode()
    assert '<div id="metrics-chart"' in html
    assert 'src="/static/plotly/plotly.min.js"' in html
    assert "/static/js/experiment.js" in html
    assert f'href="/api/v1/checkpoints/{CHECKPOINT_UUID}/download"' in html
    assert "3.0\xa0MB" in html  # filesizeformat
    assert "100 batches" in html
    assert "optimizer.momentum" in html
    trial = experiment.trials.get()
    assert reverse("dashboard:trial-logs", args=[trial.id]) in html
    assert 'id="metrics-figure"' in html
    assert "cdn" not in html.lower()


def test_it_embeds_a_figure_with_one_trace_per_charted_series(client_alice, experiment):
    response = client_alice.get(reverse("dashboard:experiment", args=[experiment.id]))
    figure = response.context["figure"]
    trial = experiment.trials.get()
    names = [trace["name"] for trace in figure["data"]]
    assert sorted(names) == sorted(
        [
            trace_name(trial.id, "training", "loss"),
            trace_name(trial.id, "validation", "validation_accuracy"),
            trace_name(trial.id, "validation", "validation_loss"),
        ]
    )


def test_metrics_figure_puts_gaps_where_nan_was(experiment):
    trial = experiment.trials.get()
    figure = metrics_figure({trial.id: read_series(trial_id=trial.id)})
    by_key = {(t["meta"]["group"], t["meta"]["metric"]): t for t in figure["data"]}
    # Training "lr" is not charted; training loss and every validation metric are.
    assert set(by_key) == {
        ("training", "loss"),
        ("validation", "validation_accuracy"),
        ("validation", "validation_loss"),
    }
    loss = by_key[("training", "loss")]
    assert list(loss["x"]) == [10, 20, 30]
    assert list(loss["y"]) == [2.0, None, 0.5]
    assert all(trace["connectgaps"] is False for trace in figure["data"])
    # Strict JSON: no NaN literal reaches the browser.
    json.dumps(figure, allow_nan=False)


def test_metrics_figure_has_a_trace_per_trial_group_and_metric():
    def series(group, name, values):
        return {"group": group, "name": name, "steps": [1, 2], "values": values}

    figure = metrics_figure(
        {
            1: [series("training", "loss", [1.0, 0.5]), series("validation", "acc", [0.1, None])],
            2: [series("training", "loss", [2.0, 1.5]), series("validation", "f1", [0.3, 0.4])],
        },
        uirevision="x",
    )
    keys = [
        (t["meta"]["trial_id"], t["meta"]["group"], t["meta"]["metric"]) for t in figure["data"]
    ]
    assert keys == [
        (1, "training", "loss"),
        (1, "validation", "acc"),
        (2, "training", "loss"),
        (2, "validation", "f1"),
    ]
    assert figure["layout"]["uirevision"] == "x"
    assert figure["layout"]["xaxis"]["title"]["text"].startswith("batches")


def test_metrics_figure_without_series_says_so():
    figure = metrics_figure({})
    assert list(figure["data"]) == []
    assert "No metrics" in figure["layout"]["annotations"][0]["text"]


def test_it_redirects_anonymous_users_to_login(client, experiment):
    trial = experiment.trials.get()
    for url in [
        reverse("dashboard:experiments"),
        reverse("dashboard:experiment", args=[experiment.id]),
        reverse("dashboard:experiment-live", args=[experiment.id]),
        reverse("dashboard:trial-logs", args=[trial.id]),
    ]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_it_returns_404_for_unknown_ids(client_alice, experiment):
    missing = experiment.id + 1000
    assert client_alice.get(reverse("dashboard:experiment", args=[missing])).status_code == 404
    assert client_alice.get(reverse("dashboard:experiment-live", args=[missing])).status_code == 404
    assert client_alice.get(reverse("dashboard:trial-logs", args=[missing])).status_code == 404


def test_live_endpoint_shape_and_token(client_alice, experiment):
    url = reverse("dashboard:experiment-live", args=[experiment.id])
    data = client_alice.get(url).json()
    assert set(data) >= {"updated", "state", "progress", "figure", "terminal", "trials_html"}
    assert data["state"] == "ACTIVE"
    # 30 of 100 batches reported: progress falls back to steps_completed / max_length.
    assert data["progress"] == pytest.approx(0.3)
    assert data["terminal"] is False
    assert len(data["figure"]["data"]) == 3
    assert "trial-" in data["trials_html"]

    # Same token: nothing changed, so nothing heavy is re-sent.
    same = client_alice.get(url, {"since": data["updated"]}).json()
    assert same["updated"] == data["updated"]
    assert same["figure"] is None and same["trials_html"] is None

    # A new report changes the summary, hence the token.
    trial = experiment.trials.get()
    trial.steps_completed = 40
    trial.summary_metrics = {"training": {"loss": {"count": 4}}}
    trial.save()
    Experiment.objects.filter(id=experiment.id).update(state=State.COMPLETED, progress=1.0)
    changed = client_alice.get(url, {"since": data["updated"]}).json()
    assert changed["updated"] != data["updated"]
    assert changed["figure"] is not None
    assert changed["state"] == "COMPLETED"
    assert changed["terminal"] is True


def test_it_shows_trial_logs(client_alice, experiment):
    trial = experiment.trials.get()
    response = client_alice.get(reverse("dashboard:trial-logs", args=[trial.id]))
    assert response.status_code == 200
    assert "epoch 0 done" in response.content.decode()


def test_login_page_and_logout_form(client, alice):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert 'name="username"' in response.content.decode()
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "pw-alice", "next": "/"}
    )
    assert response.status_code == 302
    html = client.get("/").content.decode()
    assert "alice" in html
    assert 'action="/accounts/logout/"' in html
    assert "csrfmiddlewaretoken" in html
    assert "/api/v1/schema/ui/" in html


def test_plotly_js_is_served_locally(client_alice):
    response = client_alice.get("/static/plotly/plotly.min.js")
    assert response.status_code == 200


def test_helpers_format_config_values():
    assert format_length({"epochs": 3}) == "3 epochs"
    assert format_length(500) == "500 batches"
    assert flatten_hparams({"b": 1, "a": {"x": 2}}) == [("a.x", 2), ("b", 1)]


def test_isolated_points_get_a_marker():
    assert isolated_marker_sizes([1.0, None, 2.0, 3.0, None]) == [5, 0, 0, 0, 0]
    assert isolated_marker_sizes([None, 1.0, None]) == [0, 5, 0]
    assert isolated_marker_sizes([]) == []
