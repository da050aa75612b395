"""``GET /api/v1/experiments/{id}/hparam-importance``: a random forest's importance of each
hyperparameter for a metric of a search (registry/hparam_importance.py)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from registry.hparam_importance import MIN_TRIALS
from tests.helpers_hparams import hparam_search

pytestmark = pytest.mark.django_db


def url(experiment, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/v1/experiments/{experiment.id}/hparam-importance/" + (
        f"?{query}" if query else ""
    )


def test_the_hparams_the_metric_depends_on_come_first(api, user):
    experiment, trials = hparam_search(user, 60)
    response = api.get(url(experiment))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["metric"] == "validation_accuracy" and body["trials"] == 60
    assert body["method"] == "random_forest" and body["experiment_id"] == experiment.id
    by_name = {h["name"]: h for h in body["hparams"]}
    assert set(by_name) == {"lr", "dropout", "optimizer", "layers.width"}
    ranked = [h["name"] for h in body["hparams"]]
    assert set(ranked[:2]) == {"lr", "optimizer"}, body
    assert sum(h["importance"] for h in body["hparams"]) == pytest.approx(1.0)
    assert by_name["optimizer"]["type"] == "categorical"
    assert by_name["optimizer"]["correlation"] is None
    assert by_name["lr"]["type"] == by_name["layers.width"]["type"] == "numeric"
    assert -1 <= by_name["dropout"]["correlation"] <= 1
    # Same trials, same answer: the forest's seed is fixed (and the answer cached).
    assert api.get(url(experiment)).json() == body
    # A changed value is a new answer, not the cached one.
    trials[0].best_validation = None
    trials[0].save(update_fields=["best_validation"])
    assert api.get(url(experiment)).json()["trials"] == 59


def test_another_validation_metric(api, user):
    experiment, _ = hparam_search(user, 20)
    body = api.get(url(experiment, metric="validation_loss")).json()
    assert body["metric"] == "validation_loss" and body["trials"] == 20
    assert {h["name"] for h in body["hparams"][:2]} == {"lr", "optimizer"}


def test_an_unknown_metric_is_a_400_naming_it(api, user):
    experiment, _ = hparam_search(user, 6)
    for metric in ("nope", "loss%00"):
        response = api.get(url(experiment, metric=metric))
        assert response.status_code == 400, response.content
        assert list(response.json()["errors"]) == ["metric"]
    assert (
        "validation_loss" in api.get(url(experiment, metric="nope")).json()["errors"]["metric"][0]
    )


def test_too_few_trials_with_a_value_is_a_409(api, user):
    experiment, trials = hparam_search(user, MIN_TRIALS)
    trials[0].best_validation = None
    trials[0].save(update_fields=["best_validation"])
    response = api.get(url(experiment))
    assert response.status_code == 409, response.content
    assert f"at least {MIN_TRIALS} trials" in response.json()["detail"]


def test_no_varying_hparam_gives_an_empty_list(api, user):
    experiment, trials = hparam_search(user, MIN_TRIALS)
    for trial in trials:
        trial.hparams = {"lr": 0.1}
        trial.save(update_fields=["hparams"])
    body = api.get(url(experiment)).json()
    assert body["hparams"] == [] and body["trials"] == MIN_TRIALS


def test_authentication_and_unknown_experiment(api, user):
    experiment, _ = hparam_search(user, MIN_TRIALS)
    assert APIClient().get(url(experiment)).status_code in (401, 403)
    assert api.get("/api/v1/experiments/999999/hparam-importance/").status_code == 404


def test_the_schema_documents_it(api):
    schema = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/experiments/{id}/hparam-importance/"]["get"]
    assert [p["name"] for p in operation["parameters"] if p["in"] == "query"] == ["metric"]
    assert {"200", "400", "401", "404", "409"} <= set(operation["responses"])
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    entry = schema["components"]["schemas"]["HparamImportanceEntry"]
    assert ok.endswith("/HparamImportance") and entry["properties"]["correlation"]["nullable"]


def test_odd_hparam_values_are_placed_not_a_500(api, user):
    experiment, trials = hparam_search(user, 8)
    odd = [10**400, True, None, "text", -(10**400), 3.5, {"nested": 1}, 0]
    for trial, value in zip(trials, odd, strict=True):
        trial.hparams = {**trial.hparams, "odd": value}
        trial.save(update_fields=["hparams"])
    body = api.get(url(experiment)).json()
    by_name = {h["name"]: h for h in body["hparams"]}
    assert by_name["odd"]["type"] == "categorical" and "odd.nested" in by_name
