"""REST API of model aliases: ``models/{name}/aliases/`` (set, move, delete, list, history),
``models/{name}@{alias}/`` (resolve), the aliases in the model and version rows, and the alias
dropped with its version."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry.models import Checkpoint, ModelAlias, ModelAliasEvent
from tests.helpers import register_checkpoint

pytestmark = pytest.mark.django_db

ALIASES = "/api/v1/models/resnet/aliases/"


@pytest.fixture
def bob(django_user_model) -> APIClient:
    client = APIClient()
    user = django_user_model.objects.create_user("bob", password="pw-bob")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def ckpts(trial) -> list[Checkpoint]:
    return [register_checkpoint(trial, steps_completed=s, size=10) for s in (10, 20, 30)]


@pytest.fixture
def model(api, ckpts) -> str:
    """Model ``resnet`` (alice's) with versions 1, 2 and 3."""
    assert api.post("/api/v1/models/", {"name": "resnet"}, format="json").status_code == 201
    for ckpt in ckpts:
        body = {"checkpoint_uuid": str(ckpt.uuid)}
        answer = api.post("/api/v1/models/resnet/versions/", body, format="json")
        assert answer.status_code == 201, answer.json()
    return "resnet"


def _set(client, alias: str, body) -> object:
    return client.put(f"{ALIASES}{alias}/", body, format="json")


def _history(client) -> list[tuple]:
    answer = client.get(f"{ALIASES}history/")
    assert answer.status_code == 200, answer.json()
    return [
        (e["alias"], e["action"], e["from_version"], e["to_version"], e["user"])
        for e in answer.json()["results"]
    ]


def test_set_move_resolve_and_delete(api, bob, model) -> None:
    answer = _set(api, "champion", {"version": 1})
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert (body["model"], body["alias"], body["version"], body["set_by"]) == (
        "resnet",
        "champion",
        1,
        "alice",
    )
    # Moving is one update of the same row; setting it again to the same version records nothing.
    row = ModelAlias.objects.get()
    assert _set(api, "champion", {"version": 3}).json()["version"] == 3
    assert _set(api, "champion", {"version": 3}).status_code == 200
    assert ModelAlias.objects.get().pk == row.pk
    assert _set(api, "staging", {"version": 3}).status_code == 200

    # Resolving answers exactly what the version route answers (everyone logged in may).
    resolved = bob.get("/api/v1/models/resnet@champion/")
    assert resolved.status_code == 200, resolved.json()
    assert resolved.json() == bob.get("/api/v1/models/resnet/versions/3/").json()
    assert resolved.json()["aliases"] == ["champion", "staging"]
    assert bob.get("/api/v1/models/resnet@champion").status_code == 200
    assert bob.get("/api/v1/models/resnet@latest/").json()["version"] == 3
    assert bob.get("/api/v1/models/resnet/versions/1/").json()["aliases"] == []

    listed = bob.get(ALIASES).json()["results"]
    assert [(a["alias"], a["version"]) for a in listed] == [("champion", 3), ("staging", 3)]
    assert bob.get(f"{ALIASES}champion/").json()["version"] == 3
    assert bob.get("/api/v1/models/resnet/").json()["aliases"] == [
        {"alias": "champion", "version": 3},
        {"alias": "staging", "version": 3},
    ]
    versions = bob.get("/api/v1/models/resnet/versions/").json()["results"]
    assert [(v["version"], v["aliases"]) for v in versions] == [
        (3, ["champion", "staging"]),
        (2, []),
        (1, []),
    ]

    assert api.delete(f"{ALIASES}champion/").status_code == 204
    gone = bob.get("/api/v1/models/resnet@champion/")
    assert gone.status_code == 404 and "alias" in gone.json()["errors"]
    assert api.delete(f"{ALIASES}champion/").status_code == 404
    assert _history(bob) == [
        ("champion", "DELETE", 3, None, "alice"),
        ("staging", "SET", None, 3, "alice"),
        ("champion", "MOVE", 1, 3, "alice"),
        ("champion", "SET", None, 1, "alice"),
    ]
    paged = bob.get(f"{ALIASES}history/", {"limit": 1}).json()
    assert paged["count"] == 4 and len(paged["results"]) == 1 and paged["next"]


def test_deleting_a_version_drops_its_aliases_and_records_it(api, model) -> None:
    _set(api, "champion", {"version": 2})
    _set(api, "staging", {"version": 1})
    assert api.delete("/api/v1/models/resnet/versions/2/").status_code == 204
    assert list(ModelAlias.objects.values_list("alias", flat=True)) == ["staging"]
    assert _history(api)[0] == ("champion", "VERSION_DELETED", 2, None, "alice")
    assert api.get("/api/v1/models/resnet@champion/").status_code == 404
    # Deleting the model takes its aliases and their history with it.
    assert api.delete("/api/v1/models/resnet/").status_code == 204
    assert not ModelAlias.objects.exists() and not ModelAliasEvent.objects.exists()


@pytest.mark.parametrize(
    "alias",
    ["9lives", "123", "_x", "-x", "has.dot", "a" * 65, "latest", "LATEST", "History", "caf%C3%A9"],
)
def test_bad_alias_names_are_a_400_naming_alias(api, model, alias) -> None:
    answer = _set(api, alias, {"version": 1})
    assert answer.status_code == 400, answer.json()
    assert "alias" in answer.json()["errors"], answer.json()
    assert not ModelAlias.objects.exists()


def test_a_64_character_name_with_digits_dashes_and_underscores_is_fine(api, model) -> None:
    alias = "A" + "b1_-" * 15 + "xyz"
    assert len(alias) == 64
    assert _set(api, alias, {"version": 1}).status_code == 200
    assert api.get(f"/api/v1/models/resnet@{alias}/").json()["version"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"version": 9},
        {"version": 0},
        {"version": "1"},
        {"version": 1.0},
        {"version": True},
        {"version": None},
        {"version": 2**31},
        {"version": 2**70},
    ],
)
def test_a_bad_or_unknown_version_is_a_400_naming_version(api, model, body) -> None:
    answer = _set(api, "champion", body)
    assert answer.status_code == 400, answer.json()
    assert "version" in answer.json()["errors"], answer.json()


def test_unknown_fields_models_and_aliases(api, model) -> None:
    answer = _set(api, "champion", {"version": 1, "colour": "red"})
    assert answer.status_code == 400 and "colour" in answer.json()["errors"]
    assert _set(api, "champion", [1]).status_code == 400
    assert api.put("/api/v1/models/nope/aliases/champion/", {"version": 1}).status_code == 404
    assert api.get("/api/v1/models/nope@champion/").status_code == 404
    assert api.get("/api/v1/models/nope/aliases/").status_code == 404
    assert api.get("/api/v1/models/nope/aliases/history/").status_code == 404
    missing = api.get(f"{ALIASES}champion/")
    assert missing.status_code == 404 and "alias" in missing.json()["errors"]
    assert api.get("/api/v1/models/resnet@nope/").status_code == 404
    # Names no alias can have (a NUL, which PostgreSQL refuses in text) are 404s, not 500s.
    for bad in ("nul%00x", "9" * 70, "a.b"):
        assert api.get(f"{ALIASES}{bad}/").status_code == 404, bad
        assert api.delete(f"{ALIASES}{bad}/").status_code == 404, bad
        assert api.get(f"/api/v1/models/resnet@{bad}/").status_code == 404, bad
    assert _set(api, "nul%00x", {"version": 1}).status_code == 400


def test_only_the_owner_or_staff_may_change_aliases(api, bob, model, django_user_model) -> None:
    assert _set(api, "champion", {"version": 1}).status_code == 200
    denied = _set(bob, "champion", {"version": 2})
    assert denied.status_code == 403 and "alice" in denied.json()["detail"]
    # 403 before any 400 about the body or the name.
    assert _set(bob, "9bad", {"version": 99}).status_code == 403
    assert bob.delete(f"{ALIASES}champion/").status_code == 403
    assert ModelAlias.objects.get().version.version == 1
    admin = APIClient()
    root = django_user_model.objects.create_user("root", is_staff=True)
    admin.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=root).key}")
    assert _set(admin, "champion", {"version": 2}).json()["set_by"] == "root"
    assert _history(api)[0] == ("champion", "MOVE", 1, 2, "root")
    # An archived model takes no new versions, but its aliases still move.
    api.patch("/api/v1/models/resnet/", {"archived": True}, format="json")
    assert _set(api, "champion", {"version": 3}).status_code == 200


def test_the_schema_describes_the_alias_routes(api) -> None:
    paths = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    assert set(paths["/api/v1/models/{model_name}/aliases/{alias}/"]) >= {"get", "put", "delete"}
    assert "get" in paths["/api/v1/models/{model_name}/aliases/"]
    assert "get" in paths["/api/v1/models/{model_name}/aliases/history/"]
    resolve = paths["/api/v1/models/{model_name}@{alias}/"]["get"]
    ok = resolve["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/ModelVersion"}
