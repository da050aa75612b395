"""REST: ``workspaces/``, ``projects/``, ``experiments/{id}/move`` and the experiment list's
``?project=`` / ``?workspace=`` (bad input is a 4xx naming the field, never a 500)."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry.models import DEFAULT_NAME, Experiment, default_project
from tests.helpers import TINY_CONFIG, create_experiment

pytestmark = pytest.mark.django_db


def _client_of(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _workspace(api, name="team") -> dict:
    response = api.post("/api/v1/workspaces/", {"name": name}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _project(api, workspace_id: int, name="vision") -> dict:
    response = api.post(
        "/api/v1/projects/", {"workspace": workspace_id, "name": name}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


def test_it_creates_lists_and_describes_workspaces_and_projects(api):
    workspace = _workspace(api)
    assert workspace["owner"] == "alice" and not workspace["archived"]
    project = _project(api, workspace["id"])
    assert (project["workspace_id"], project["workspace_name"]) == (workspace["id"], "team")
    names = [w["name"] for w in api.get("/api/v1/workspaces/").json()["results"]]
    assert names == [DEFAULT_NAME, "team"]
    listed = api.get(f"/api/v1/projects/?workspace={workspace['id']}").json()["results"]
    assert [p["id"] for p in listed] == [project["id"]]
    described = api.get(f"/api/v1/workspaces/{workspace['id']}/").json()
    assert described["num_projects"] == 1 and described["num_experiments"] == 0
    assert api.get(f"/api/v1/projects/{project['id']}/").json()["name"] == "vision"


def test_experiments_show_their_project_and_filter_by_it(api):
    default_id = create_experiment(api).json()["id"]
    workspace = _workspace(api)
    project = _project(api, workspace["id"])
    placed = create_experiment(api, config=TINY_CONFIG + "workspace: team\nproject: vision\n")
    assert placed.status_code == 201, placed.json()
    body = placed.json()
    assert (body["project_id"], body["project_name"]) == (project["id"], "vision")
    assert (body["workspace_id"], body["workspace_name"]) == (workspace["id"], "team")
    default = api.get(f"/api/v1/experiments/{default_id}/").json()
    assert default["project_name"] == DEFAULT_NAME == default["workspace_name"]
    by_project = api.get(f"/api/v1/experiments/?project={project['id']}").json()["results"]
    assert [e["id"] for e in by_project] == [body["id"]]
    by_workspace = api.get(f"/api/v1/experiments/?workspace={workspace['id']}").json()
    assert [e["id"] for e in by_workspace["results"]] == [body["id"]]
    assert api.get(f"/api/v1/projects/{project['id']}/").json()["num_experiments"] == 1


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("workspace: nope\nproject: x\n", "config.workspace"),
        ("workspace: team\nproject: nope\n", "config.project"),
        ("project: vision\n", "config.workspace"),
        ("workspace: [1]\nproject: vision\n", "config.workspace"),
    ],
)
def test_it_refuses_a_config_naming_an_unknown_place(api, extra, field):
    _project(api, _workspace(api)["id"])
    response = create_experiment(api, config=TINY_CONFIG + extra)
    assert response.status_code == 400 and field in response.json()["errors"], response.json()
    assert not Experiment.objects.exists()


def test_archived_places_take_no_new_experiments(api):
    workspace = _workspace(api)
    project = _project(api, workspace["id"])
    archived = api.post(f"/api/v1/projects/{project['id']}/archive/")
    assert archived.status_code == 200 and archived.json()["archived"]
    response = create_experiment(api, config=TINY_CONFIG + "workspace: team\nproject: vision\n")
    assert response.status_code == 400 and "config.project" in response.json()["errors"]
    experiment_id = create_experiment(api).json()["id"]
    moved = api.post(
        f"/api/v1/experiments/{experiment_id}/move/", {"project": project["id"]}, format="json"
    )
    assert moved.status_code == 400 and "project" in moved.json()["errors"]
    assert not api.post(f"/api/v1/projects/{project['id']}/unarchive/").json()["archived"]
    assert api.post(f"/api/v1/workspaces/{workspace['id']}/archive/").json()["archived"]
    listed = api.get("/api/v1/workspaces/?archived=true").json()["results"]
    assert [w["id"] for w in listed] == [workspace["id"]]
    made = api.post(
        "/api/v1/projects/", {"workspace": workspace["id"], "name": "late"}, format="json"
    )
    assert made.status_code == 400 and "workspace" in made.json()["errors"]


def test_it_moves_an_experiment(api):
    experiment_id = create_experiment(api).json()["id"]
    project = _project(api, _workspace(api)["id"])
    moved = api.post(
        f"/api/v1/experiments/{experiment_id}/move", {"project": project["id"]}, format="json"
    )
    assert moved.status_code == 200, moved.json()
    assert moved.json()["project_id"] == project["id"]
    back = api.post(
        f"/api/v1/experiments/{experiment_id}/move/",
        {"project": default_project().id},
        format="json",
    )
    assert back.json()["project_name"] == DEFAULT_NAME


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/workspaces/", {}, "name"),
        ("/api/v1/workspaces/", {"name": ""}, "name"),
        ("/api/v1/workspaces/", {"name": "a\nb"}, "name"),
        ("/api/v1/workspaces/", {"name": "x" * 129}, "name"),
        ("/api/v1/workspaces/", {"name": 5}, "name"),
        ("/api/v1/workspaces/", {"name": "ok", "owner": "bob"}, "owner"),
        ("/api/v1/projects/", {"name": "p"}, "workspace"),
        ("/api/v1/projects/", {"workspace": 10**9, "name": "p"}, "workspace"),
        ("/api/v1/projects/", {"workspace": "x", "name": "p"}, "workspace"),
        ("/api/v1/projects/", {"workspace": 2**64, "name": "p"}, "workspace"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, path, body, field):
    response = api.post(path, body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()


@pytest.mark.parametrize("body", [{}, {"project": "x"}, {"project": 0}, {"project": 10**9}])
def test_a_bad_move_is_a_400_naming_project(api, body):
    experiment_id = create_experiment(api).json()["id"]
    response = api.post(f"/api/v1/experiments/{experiment_id}/move/", body, format="json")
    assert response.status_code == 400 and "project" in response.json()["errors"]


def test_bad_filters_and_ids_are_4xx(api):
    for query in ("project=x", "workspace=-1", "project=1&project=2"):
        response = api.get(f"/api/v1/experiments/?{query}")
        assert response.status_code == 400, query
        assert query.split("=")[0] in response.json()["errors"]
    assert api.get("/api/v1/projects/?workspace=0").status_code == 400
    assert api.get("/api/v1/workspaces/?archived=maybe").status_code == 400
    assert api.get(f"/api/v1/workspaces/{2**64}/").status_code == 404
    assert api.get("/api/v1/projects/999999/").status_code == 404


def test_duplicate_names_are_409_naming_name(api):
    workspace = _workspace(api)
    again = api.post("/api/v1/workspaces/", {"name": "team"}, format="json")
    assert again.status_code == 409 and "name" in again.json()["errors"]
    _project(api, workspace["id"])
    again = api.post(
        "/api/v1/projects/", {"workspace": workspace["id"], "name": "vision"}, format="json"
    )
    assert again.status_code == 409 and "name" in again.json()["errors"]


def test_only_owners_and_admins_archive_and_move(api, django_user_model):
    workspace = _workspace(api)
    project = _project(api, workspace["id"])
    experiment_id = create_experiment(api).json()["id"]
    bob = _client_of(django_user_model.objects.create_user("bob"))
    # A new workspace is private: 404 to bob until its admin gives him a role.
    assert bob.get(f"/api/v1/workspaces/{workspace['id']}/").status_code == 404
    members = f"/api/v1/workspaces/{workspace['id']}/members/"
    assert api.post(members, {"user": "bob", "role": "editor"}, format="json").status_code == 201
    assert bob.get(f"/api/v1/workspaces/{workspace['id']}/").status_code == 200
    assert bob.post(f"/api/v1/workspaces/{workspace['id']}/archive/").status_code == 403
    assert bob.post(f"/api/v1/projects/{project['id']}/archive/").status_code == 403
    moved = bob.post(
        f"/api/v1/experiments/{experiment_id}/move/", {"project": project["id"]}, format="json"
    )
    assert moved.status_code == 403
    # An editor may create a project in someone else's workspace; they own it.
    assert _project(bob, workspace["id"], "bobs")["owner"] == "bob"
    admin = _client_of(django_user_model.objects.create_user("root", is_staff=True))
    assert admin.post(f"/api/v1/projects/{project['id']}/archive/").status_code == 200
    default = default_project()
    refused = admin.post(f"/api/v1/workspaces/{default.workspace_id}/archive/")
    assert refused.status_code == 409


def test_anonymous_callers_are_refused():
    assert APIClient().get("/api/v1/workspaces/").status_code in (401, 403)
    assert APIClient().post("/api/v1/projects/", {}, format="json").status_code in (401, 403)
