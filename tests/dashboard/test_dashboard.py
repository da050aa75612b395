"""Dashboard pages, the live endpoint and the chart options they embed (Django test client, real DB)."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from dashboard.selectors import flatten_hparams, format_length, format_search_length
from registry.metrics import metrics_report, parse_reports
from registry.models import Checkpoint, Experiment, State, Trial, TrialLog
from tests.helpers import DASHBOARD_CONFIG

CHECKPOINT_UUID = uuid.UUID("0f4b8a52-6a43-4f55-9d9c-3f3b2a1d0e77")


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
    assert 'id="metrics-board"' in html
    assert 'src="/static/plotly/plotly-headway.min.js"' in html
    for script in ("charts.js", "hparams.js", "trials_table.js", "experiment.js"):
        assert f"/static/js/{script}" in html
    # The trials table: latest checkpoint link + CLI, hparams in one cell, compare ticks.
    assert f'href="/api/v1/checkpoints/{CHECKPOINT_UUID}/download"' in html
    trial = experiment.trials.get()
    menu = client_alice.get(reverse("dashboard:trial-menu", args=[trial.id])).content.decode()
    assert f'data-copy="headway checkpoint download {CHECKPOINT_UUID}"' in menu
    assert "100 batches" in html
    assert '<span class="hp-key">optimizer.momentum</span>=' in html
    trial = experiment.trials.get()
    assert f'name="trial" value="{trial.id}" form="compare-form"' in html
    assert reverse("dashboard:trial-logs", args=[trial.id]) in html
    assert 'id="metrics-options"' in html
    assert "cdn" not in html.lower()


def test_chart_options_list_every_metric_and_the_trials(client_alice, experiment):
    response = client_alice.get(reverse("dashboard:experiment", args=[experiment.id]))
    options = response.context["chart_options"]
    trial = experiment.trials.get()
    assert options["sources"] == [{"url": f"/api/v1/experiments/{experiment.id}/metrics"}]
    # Every metric of every group, validation first (not only losses).
    assert options["metrics"] == [
        {"group": "validation", "name": "validation_accuracy"},
        {"group": "validation", "name": "validation_loss"},
        {"group": "training", "name": "loss"},
        {"group": "training", "name": "lr"},
    ]
    # The trials are not embedded: the page fetches them (trials JSON).
    assert options["trials"] == [] and options["trialCount"] == 1 and options["system"] == []
    data = client_alice.get(reverse("dashboard:experiment-trials-data", args=[experiment.id]))
    [entry] = data.json()["trials"]
    assert entry["id"] == trial.id and entry["hparams"]["optimizer.momentum"] == 0.9
    assert options["bestTrialId"] == trial.id
    # A single trial: no hyperparameter views.
    assert response.context["hparam_data"] is None


def test_the_config_shows_as_submitted_and_with_defaults(client_alice, experiment):
    Experiment.objects.filter(id=experiment.id).update(original_config="name: digits-mlp  # mine\n")
    html = client_alice.get(reverse("dashboard:experiment", args=[experiment.id])).content.decode()
    assert "name: digits-mlp  # mine" in html
    assert 'id="config-effective"' in html
    effective = html.split('id="config-effective">', 1)[1].split("</pre>", 1)[0]
    assert "max_length:" in effective and "batches: 100" in effective


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
    assert set(data) >= {"updated", "state", "progress", "metrics", "terminal", "trials_html"}
    assert data["state"] == "ACTIVE"
    # 30 of 100 batches reported: progress falls back to steps_completed / max_length.
    assert data["progress"] == pytest.approx(0.3)
    assert data["terminal"] is False
    assert len(data["metrics"]) == 4
    trial = experiment.trials.get()
    assert data["best_trial_id"] == trial.id
    assert f'id="trial-{trial.id}"' in data["trials_html"]

    # Same token: nothing changed, so nothing heavy is re-sent.
    same = client_alice.get(url, {"since": data["updated"]}).json()
    assert same["updated"] == data["updated"]
    assert same["metrics"] is None and same["trials_html"] is None

    # A new report changes the summary, hence the token.
    trial.steps_completed = 40
    trial.summary_metrics = {"training": {"loss": {"count": 4}}}
    trial.save()
    Experiment.objects.filter(id=experiment.id).update(state=State.COMPLETED, progress=1.0)
    changed = client_alice.get(url, {"since": data["updated"]}).json()
    assert changed["updated"] != data["updated"]
    assert changed["metrics"] is not None
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
    response = client_alice.get("/static/plotly/plotly-headway.min.js")
    assert response.status_code == 200


def test_helpers_format_config_values():
    assert format_length({"epochs": 3}) == "3 epochs"
    assert format_length(500) == "500 batches"
    assert flatten_hparams({"b": 1, "a": {"x": 2}}) == [("a.x", 2), ("b", 1)]


def test_the_length_shown_for_determined_038_searchers():
    assert format_search_length({"max_length": {"epochs": 2}}) == "2 epochs"
    asha = {"max_length": None, "time_metric": "batches", "max_time": 937}
    assert format_search_length(asha) == "937 batches (time_metric)"
    assert format_search_length({"name": "single", "max_length": None}) == "set by the script"
