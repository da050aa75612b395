"""``GET /api/v1/experiments/{id}/hparam-importance``: a random forest's importance of each
hyperparameter for a metric of a search (registry/hparam_importance.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from registry.hparam_importance import BUSY_SECONDS, MIN_TRIALS, POLL_SECONDS
from registry.hparam_importance_fit import MAX_HPARAMS
from registry.models import FitState, HparamImportanceFit
from tests.helpers_hparams import fit_task, hparam_search, run_queued_fits

pytestmark = pytest.mark.django_db


def fitted(api, path: str):
    """GET ``path``: a 202 while its fit is queued, then, once the worker ran it, the answer."""
    queued = api.get(path)
    assert queued.status_code == 202, queued.content
    assert queued["Retry-After"] == str(POLL_SECONDS)
    assert queued.json()["state"] == "queued"
    assert api.get(path).status_code == 202  # asked again: the same fit, not a second one
    assert run_queued_fits() == 1
    return api.get(path)


def url(experiment, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/v1/experiments/{experiment.id}/hparam-importance/" + (
        f"?{query}" if query else ""
    )


def test_the_hparams_the_metric_depends_on_come_first(api, user):
    experiment, trials = hparam_search(user, 60)
    response = fitted(api, url(experiment))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["metric"] == "validation_accuracy" and body["trials"] == 60
    assert body["method"] == "random_forest" and body["experiment_id"] == experiment.id
    assert body["hparams_varying"] == 4
    by_name = {h["name"]: h for h in body["hparams"]}
    assert set(by_name) == {"lr", "dropout", "optimizer", "layers.width"}
    ranked = [h["name"] for h in body["hparams"]]
    assert set(ranked[:2]) == {"lr", "optimizer"}, body
    assert sum(h["importance"] for h in body["hparams"]) == pytest.approx(1.0)
    assert by_name["optimizer"]["type"] == "categorical"
    assert by_name["optimizer"]["correlation"] is None
    assert by_name["lr"]["type"] == by_name["layers.width"]["type"] == "numeric"
    assert -1 <= by_name["dropout"]["correlation"] <= 1
    # Same trials, same answer, stored: no second fit.
    assert api.get(url(experiment)).json() == body
    assert run_queued_fits() == 0
    # A changed value is a new fit, not the stored answer; its result replaces the older one.
    trials[0].best_validation = None
    trials[0].save(update_fields=["best_validation"])
    assert fitted(api, url(experiment)).json()["trials"] == 59
    assert HparamImportanceFit.objects.filter(experiment=experiment).count() == 1


def test_another_validation_metric(api, user):
    experiment, _ = hparam_search(user, 20)
    body = fitted(api, url(experiment, metric="validation_loss")).json()
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
    body = fitted(api, url(experiment)).json()
    assert body["hparams"] == [] and body["trials"] == MIN_TRIALS


def test_authentication_and_unknown_experiment(api, user):
    experiment, _ = hparam_search(user, MIN_TRIALS)
    assert APIClient().get(url(experiment)).status_code in (401, 403)
    assert api.get("/api/v1/experiments/999999/hparam-importance/").status_code == 404


def test_the_schema_documents_it(api):
    schema = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/experiments/{id}/hparam-importance/"]["get"]
    assert [p["name"] for p in operation["parameters"] if p["in"] == "query"] == ["metric"]
    assert {"200", "202", "400", "401", "404", "409", "422", "429"} <= set(operation["responses"])
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    entry = schema["components"]["schemas"]["HparamImportanceEntry"]
    assert ok.endswith("/HparamImportance") and entry["properties"]["correlation"]["nullable"]


def test_odd_hparam_values_are_placed_not_a_500(api, user):
    experiment, trials = hparam_search(user, 8)
    odd = [10**400, True, None, "text", -(10**400), 3.5, {"nested": 1}, 0]
    for trial, value in zip(trials, odd, strict=True):
        trial.hparams = {**trial.hparams, "odd": value}
        trial.save(update_fields=["hparams"])
    body = fitted(api, url(experiment)).json()
    by_name = {h["name"]: h for h in body["hparams"]}
    assert by_name["odd"]["type"] == "categorical" and "odd.nested" in by_name


@override_settings(HEADWAY_HPARAM_IMPORTANCE_MAX_FITS=2)
def test_more_fits_than_the_slots_is_a_429_until_one_ends(api, user):
    searches = [hparam_search(user, MIN_TRIALS, name=f"search-{i}")[0] for i in range(3)]
    assert api.get(url(searches[0])).status_code == 202
    assert api.get(url(searches[1], metric="validation_loss")).status_code == 202
    busy = api.get(url(searches[2]))
    assert busy.status_code == 429, busy.content
    assert busy["Retry-After"] == str(BUSY_SECONDS) and "busy" in busy.json()["detail"]
    # A search already queued is still answered 202 (its own fit), not 429.
    assert api.get(url(searches[0])).status_code == 202
    assert run_queued_fits() == 2
    assert api.get(url(searches[2])).status_code == 202
    assert run_queued_fits() == 1
    done = [url(searches[0]), url(searches[1], metric="validation_loss"), url(searches[2])]
    assert [api.get(path).status_code for path in done] == [200, 200, 200]


def test_at_most_max_hparams_are_fitted_those_most_associated_first(api, user):
    experiment, trials = hparam_search(user, 30)
    for i, trial in enumerate(trials):
        noise = {f"noise{j:03d}": (i * 7919 + j * 104729) % 997 for j in range(MAX_HPARAMS + 20)}
        trial.hparams = {**trial.hparams, "extra": noise}
        trial.save(update_fields=["hparams"])
    body = fitted(api, url(experiment)).json()
    assert body["hparams_varying"] == MAX_HPARAMS + 24
    names = {h["name"] for h in body["hparams"]}
    assert len(names) == MAX_HPARAMS
    assert {"lr", "optimizer"} <= names  # the metric depends on them: never screened out


@override_settings(HEADWAY_HPARAM_IMPORTANCE_TIME_LIMIT_SECONDS=1)
def test_a_fit_past_its_time_limit_is_stored_as_a_422(api, user, monkeypatch):
    import registry.hparam_importance as importance

    experiment, _ = hparam_search(user, MIN_TRIALS)
    assert api.get(url(experiment)).status_code == 202
    # The task started long ago by its own clock: the forest's first batch is past the deadline.
    monkeypatch.setattr(importance, "time", SimpleNamespace(monotonic=lambda: -1000.0))
    assert run_queued_fits() == 1
    failed = api.get(url(experiment))
    assert failed.status_code == 422, failed.content
    assert "did not finish within 1 s" in failed.json()["detail"]
    assert list(failed.json()["errors"]) == ["metric"]
    assert HparamImportanceFit.objects.get(experiment=experiment).slot is None


def test_a_lost_fit_frees_its_slot_and_is_queued_again(api, user):
    experiment, _ = hparam_search(user, MIN_TRIALS)
    assert api.get(url(experiment)).status_code == 202
    lost = HparamImportanceFit.objects.get(experiment=experiment)
    # Queued long before anything could still be running it (a worker stopped mid-fit).
    lost.queued_at = lost.queued_at.replace(year=2000)
    lost.save(update_fields=["queued_at"])
    assert api.get(url(experiment)).status_code == 202
    again = HparamImportanceFit.objects.get(experiment=experiment)
    assert again.id != lost.id and again.state == FitState.QUEUED
    fit_task(lost.id)  # the lost message, delivered late, finds nothing to do
    assert run_queued_fits() == 1
    assert api.get(url(experiment)).status_code == 200


@pytest.mark.parametrize(
    "name",
    [
        "validation_" + "x" * 245,  # the longest name a report takes (256)
        "val.loss[0]\"$\\ 'x",  # JSON-path syntax in the name: a key, not a path
    ],
)
def test_odd_metric_names_are_fitted_not_a_500(api, user, name):
    from urllib.parse import quote

    from registry.metrics import metrics_report, parse_reports

    experiment, trials = hparam_search(user, MIN_TRIALS)
    for i, trial in enumerate(trials):
        report = {"group": "validation", "steps_completed": 100, "metrics": {name: float(i)}}
        metrics_report(trial_id=trial.id, reports=parse_reports({"reports": [report]}))
    body = fitted(api, url(experiment, metric=quote(name))).json()
    assert body["metric"] == name and body["trials"] == MIN_TRIALS
