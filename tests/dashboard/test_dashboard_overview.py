"""Experiment overview, compare page and model-definition viewer (Django test client, real DB):
what the pages embed for the charts, input validation, and bounded queries."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from dashboard.compare_selectors import hparam_diff, parse_trial_ids
from registry.metrics import metrics_report, parse_reports
from registry.models import Experiment, Trial, TrialLog
from tests.helpers import DASHBOARD_CONFIG, make_tar_gz

pytestmark = pytest.mark.django_db


def _experiment(owner, trials: int, name: str = "search") -> Experiment:
    experiment = Experiment.objects.create(
        owner=owner,
        name=name,
        config=DASHBOARD_CONFIG,
        model_definition=make_tar_gz(
            {"model_def.py": "class T:\n    pass\n", "weights.bin": "\0\1\2", "sub/notes.txt": "é"}
        ),
    )
    for i in range(trials):
        trial = Trial.objects.create(
            experiment=experiment,
            hparams={"lr": 0.1 / (i + 1), "layers": {"width": 64}},
            latest_checkpoint=uuid.uuid4(),
        )
        reports = [
            {"group": "training", "steps_completed": s, "metrics": {"loss": 1 / s, "lr": 0.1}}
            for s in range(1, 30)
        ]
        reports.append(
            {
                "group": "validation",
                "steps_completed": 29,
                "metrics": {"validation_accuracy": 0.5 + i / 100},
            }
        )
        metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))
        TrialLog.objects.create(trial=trial, run_id=1, message="hello")
    return experiment


def test_hparam_data_and_best_trial_of_a_search(client_alice, alice):
    experiment = _experiment(alice, 3)
    response = client_alice.get(reverse("dashboard:experiment", args=[experiment.id]))
    data = response.context["hparam_data"]
    trials = list(experiment.trials.order_by("id"))
    # Only hyperparameters that differ between trials get an axis.
    assert data["hparams"] == ["lr"]
    assert data["metric"] == "validation_accuracy" and data["smaller_is_better"] is False
    assert [t["id"] for t in data["trials"]] == [t.id for t in trials]
    assert data["trials"][2]["value"] == pytest.approx(0.52)
    # Larger is better: the last trial is the best, and its row says so in text, not colour only.
    assert response.context["best_trial_id"] == trials[2].id
    html = response.content.decode()
    assert 'class="badge badge-best"' in html
    assert 'id="hparam-parcoords"' in html and 'id="hparam-data"' not in html
    # The data comes from the trials JSON, fetched by the page.
    fetched = client_alice.get(reverse("dashboard:experiment-trials-data", args=[experiment.id]))
    assert fetched.json()["hparams"] == ["lr"] and fetched.json()["best"] == trials[2].id


def test_the_experiment_page_runs_a_bounded_number_of_queries(
    client_alice, alice, django_assert_max_num_queries
):
    small = _experiment(alice, 2, name="small")
    big = _experiment(alice, 40, name="big")
    for experiment in (small, big):
        # 12, and the trials table's column names and saved views.
        with django_assert_max_num_queries(14):
            response = client_alice.get(reverse("dashboard:experiment", args=[experiment.id]))
        assert response.status_code == 200
        with django_assert_max_num_queries(13):  # 12 and the saved views
            live = client_alice.get(reverse("dashboard:experiment-live", args=[experiment.id]))
        assert live.status_code == 200


def test_compare_overlays_trials_of_several_experiments(client_alice, alice):
    first = _experiment(alice, 2, name="first")
    second = _experiment(alice, 1, name="second")
    ids = [t.id for t in first.trials.order_by("id")] + [second.trials.get().id]
    response = client_alice.get(
        reverse("dashboard:compare"), {"trial": [str(ids[0]), f"{ids[1]}, {ids[2]}"]}
    )
    assert response.status_code == 200
    options = response.context["chart_options"]
    assert options["sources"] == [
        {"url": f"/api/v1/experiments/{first.id}/metrics", "trialIds": ids[:2]},
        {"url": f"/api/v1/experiments/{second.id}/metrics", "trialIds": ids[2:]},
    ]
    # Trials of several experiments are labelled with their experiment.
    assert options["trials"][2]["label"] == f"E{second.id} T{ids[2]}"
    assert {(m["group"], m["name"]) for m in options["metrics"]} == {
        ("training", "loss"),
        ("training", "lr"),
        ("validation", "validation_accuracy"),
    }
    diff = response.context["diff"]
    assert [row["name"] for row in diff] == ["lr", "layers.width"]
    assert diff[0]["differs"] and not diff[1]["differs"]


def test_compare_reports_bad_and_unknown_ids(client_alice, alice):
    experiment = _experiment(alice, 1)
    trial = experiment.trials.get()
    response = client_alice.get(
        reverse("dashboard:compare"), {"trial": ["abc", str(trial.id), "999999"]}
    )
    assert response.status_code == 200  # the valid trial is still compared
    html = response.content.decode()
    assert "trial: &#x27;abc&#x27; is not a trial id" in html
    assert "trial: no trial 999999." in html
    assert client_alice.get(reverse("dashboard:compare"), {"trial": "0"}).status_code == 400
    assert client_alice.get(reverse("dashboard:compare")).status_code == 200  # empty: a hint


def test_parse_and_diff_helpers():
    assert parse_trial_ids(["3, 7 9", "3"]) == ([3, 7, 9], [])
    ids, errors = parse_trial_ids([" ".join(str(i) for i in range(1, 60))])
    assert len(ids) == 50 and "at most 50" in errors[0]
    a, b = Trial(hparams={"lr": 1, "x": {"y": 2}}), Trial(hparams={"lr": 1})
    rows = hparam_diff([a, b])
    assert rows == [
        {"name": "x.y", "values": [2, None], "differs": True},
        {"name": "lr", "values": [1, 1], "differs": False},
    ]


def test_model_definition_viewer(client_alice, alice):
    experiment = _experiment(alice, 1)
    url = reverse("dashboard:experiment-files", args=[experiment.id])
    response = client_alice.get(url)
    assert response.status_code == 200
    assert [f.path for f in response.context["files"]] == [
        "model_def.py",
        "sub/notes.txt",
        "weights.bin",
    ]
    view = client_alice.get(url, {"path": "model_def.py"}).context["view"]
    assert view.text == "class T:\n    pass\n" and not view.truncated
    assert client_alice.get(url, {"path": "sub/notes.txt"}).context["view"].text == "é"
    assert client_alice.get(url, {"path": "weights.bin"}).context["view"].text is None  # binary
    assert client_alice.get(url, {"path": "../etc/passwd"}).status_code == 400
    assert client_alice.get(url, {"path": "/etc/passwd"}).status_code == 400
    assert client_alice.get(url, {"path": "missing.py"}).status_code == 404
    assert client_alice.get(reverse("dashboard:experiment-files", args=[987654])).status_code == 404


def test_the_list_live_endpoint(client_alice, alice, django_assert_max_num_queries):
    first = _experiment(alice, 2, name="first")
    second = _experiment(alice, 0, name="second")
    url = reverse("dashboard:experiments-live")
    # Two more than before roles: the user's roles (registry.authz.workspace_roles).
    with django_assert_max_num_queries(6):
        data = client_alice.get(url, {"id": [first.id, second.id, 987654]}).json()
    rows = {row["id"]: row for row in data["experiments"]}
    assert set(rows) == {first.id, second.id}
    assert rows[first.id]["num_trials"] == 2 and rows[first.id]["active_trials"] == 2
    assert rows[first.id]["state"] == "ACTIVE" and rows[first.id]["terminal"] is False
    assert client_alice.get(url, {"id": "x"}).json() == {"id": ["Must be integers."]}
    assert client_alice.get(url, {"id": list(range(101))}).status_code == 400
    client_alice.logout()
    assert client_alice.get(url).status_code == 302  # to the login page
