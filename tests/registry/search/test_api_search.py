"""REST end to end: ``?filter=`` and ``?order_by=`` on ``trials/``, an experiment's
``trials/`` and ``experiments/``, with the lists' other parameters and paging."""

from urllib.parse import urlencode

import pytest

pytestmark = pytest.mark.django_db


def names(world, body):
    return [world.by_id[row["id"]] for row in body["results"]]


def get(api, path, **params):
    return api.get(f"{path}?{urlencode(params)}")


def test_the_global_trial_list_filters_and_sorts_across_experiments(api, world):
    answer = get(
        api,
        "/api/v1/trials/",
        filter='accuracy > 0.95 and hparams.optimizer = "adam"',
        order_by="-accuracy",
    )
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["count"] == 2 and names(world, body) == ["t1", "t3"]
    assert body["results"][0]["summary_metrics"]["validation"]["accuracy"]["last"] == 0.97
    # Paged in the requested order.
    page = get(api, "/api/v1/trials/", order_by="hparams.lr", limit=2, offset=1).json()
    assert page["count"] == 4 and names(world, page) == ["t1", "t2"]
    # No filter: every trial, by id.
    assert names(world, api.get("/api/v1/trials/").json()) == ["t1", "t2", "t3", "t4"]


def test_an_experiments_trial_list_filters_within_it(api, world):
    body = get(
        api, f"/api/v1/experiments/{world.vision.id}/trials/", filter="state in (ERROR, CANCELED)"
    ).json()
    assert names(world, body) == ["t2"]
    body = get(api, f"/api/v1/experiments/{world.nlp.id}/trials/", order_by="-start_time").json()
    assert names(world, body) == ["t4", "t3"]


def test_the_experiment_list_filters_with_its_other_parameters(api, world):
    listing = get(api, "/api/v1/experiments/", filter="accuracy > 0.95").json()
    assert sorted(e["id"] for e in listing["results"]) == sorted([world.vision.id, world.nlp.id])
    # archived=false is applied as well: bert is archived.
    listing = get(api, "/api/v1/experiments/", filter="accuracy > 0.95", archived="false").json()
    assert [e["id"] for e in listing["results"]] == [world.vision.id]
    listing = get(api, "/api/v1/experiments/", filter='labels contains "nlp"').json()
    assert [e["id"] for e in listing["results"]] == [world.nlp.id]


@pytest.mark.parametrize(
    ("order_by", "expected"),
    [
        ("name", ["nlp", "vision"]),  # "bert" < "resnet baseline"
        ("-name", ["vision", "nlp"]),
        ("start_time", ["vision", "nlp"]),
        ("-start_time", ["nlp", "vision"]),
        ("owner", None),  # by username: computed in the test
        ("-best_validation", ["vision", "nlp"]),  # nlp has none: last either way
        ("best_validation", ["vision", "nlp"]),
        ("archived,name", ["vision", "nlp"]),
        ("end_time", ["vision", "nlp"]),
    ],
)
def test_the_experiment_list_sorts_by_its_own_fields_missing_last(api, world, order_by, expected):
    answer = get(api, "/api/v1/experiments/", order_by=order_by)
    assert answer.status_code == 200, answer.json()
    by_id = {world.vision.id: "vision", world.nlp.id: "nlp"}
    if order_by == "owner":
        owners = sorted([(world.vision.owner.username, "vision"), ("bob", "nlp")])
        expected = [name for _, name in owners]
    assert [by_id[e["id"]] for e in answer.json()["results"]] == expected
    # Paged in that order, with the filter beside it.
    page = get(api, "/api/v1/experiments/", order_by=order_by, limit=1, offset=1).json()
    assert page["count"] == 2 and [by_id[e["id"]] for e in page["results"]] == expected[1:]


@pytest.mark.parametrize(
    ("path", "params", "name", "words"),
    [
        ("/api/v1/trials/", {"filter": "accuracy >"}, "filter", ["position 11", "a value"]),
        ("/api/v1/trials/", {"filter": "hparam.lr < 1"}, "filter", ["`hparam.lr`"]),
        ("/api/v1/trials/", {"filter": "state > 1"}, "filter", ["`state`"]),
        ("/api/v1/trials/", {"filter": "(a = 1"}, "filter", ['")"']),
        ("/api/v1/trials/", {"filter": "a\x00 = 1"}, "filter", ["NUL"]),
        ("/api/v1/trials/", {"order_by": "labels"}, "order_by", ["`labels`"]),
        ("/api/v1/trials/", {"order_by": "hparam.lr"}, "order_by", ["`hparam.lr`"]),
        ("/api/v1/experiments/", {"filter": "name > 3"}, "filter", ["`name`"]),
        ("/api/v1/experiments/", {"filter": "or"}, "filter", ["position 3", "operator"]),
        ("/api/v1/experiments/", {"order_by": "-accuracy"}, "order_by", ["`accuracy`", "trials"]),
        ("/api/v1/experiments/", {"order_by": "hparams.lr"}, "order_by", ["`hparams.lr`"]),
        ("/api/v1/experiments/", {"order_by": "labels"}, "order_by", ["`labels`"]),
        ("/api/v1/experiments/", {"order_by": "name,"}, "order_by", ["empty key"]),
        ("/api/v1/experiments/", {"order_by": "hparam.x"}, "order_by", ["`hparam.x`"]),
        ("/api/v1/experiments/{vision}/trials/", {"filter": "x in ()"}, "filter", ["a value"]),
    ],
)
def test_bad_filters_are_a_400_naming_the_parameter(api, world, path, params, name, words):
    answer = get(api, path.format(vision=world.vision.id), **params)
    assert answer.status_code == 400, answer.content
    body = answer.json()
    [message] = body["errors"][name] if "errors" in body else body[name]
    assert all(word in message for word in words), message


def test_a_repeated_filter_is_a_400(api, world):
    answer = api.get("/api/v1/trials/?filter=a%3D1&filter=b%3D2")
    assert answer.status_code == 400 and "filter" in str(answer.json())


def test_a_trial_token_may_not_list_trials(api, world):
    from rest_framework.test import APIClient

    from registry.models import TrialRun

    run = TrialRun.objects.create(trial=world.trials["t1"], run_id=1)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run.token}")
    assert client.get("/api/v1/trials/").status_code in (401, 403)


def test_the_filter_and_order_by_are_in_the_schema(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    for path in ("/api/v1/trials/", "/api/v1/experiments/{id}/trials/"):
        names_ = {p["name"] for p in schema["paths"][path]["get"]["parameters"]}
        assert {"filter", "order_by"} <= names_
    names_ = {p["name"] for p in schema["paths"]["/api/v1/experiments/"]["get"]["parameters"]}
    assert {"filter", "order_by"} <= names_
