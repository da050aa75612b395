"""Models in workspaces (``registry.authz`` through ``registry.model_registry``): workspace
``team`` made by ``ws-admin`` (its admin), with ``ws-viewer`` and ``ws-editor`` bound;
``ws-out`` has no role there and ``ws-root`` is a site admin. Every route of the model registry
with a role-less user is walked in ``test_workspace_roles.py``; here what each role may do,
creating into a workspace, moving a model, the dashboard, the MLflow-compatible API and the
migration.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry import lifecycle, model_registry, workspaces
from registry.models import DEFAULT_NAME, ModelVersion, RegisteredModel
from registry.workspace_roles import grant
from tests.helpers import TINY_CONFIG, TINY_MODEL, register_checkpoint

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.default_format = "json"  # a workspace id stays a number
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def team(django_user_model) -> SimpleNamespace:
    """Workspace ``team``, its users' API clients and users, and a model ``team-model`` of the
    admin's there."""
    users = {
        name: django_user_model.objects.create_user(f"ws-{name}")
        for name in ("admin", "viewer", "editor", "out")
    }
    users["root"] = django_user_model.objects.create_user("ws-root", is_staff=True)
    workspace = workspaces.workspace_create(owner=users["admin"], name="team")
    for role in ("viewer", "editor"):
        grant(workspace=workspace, actor=users["admin"], user=f"ws-{role}", role=role)
    model = model_registry.model_create(
        owner=users["admin"], name="team-model", workspace=workspace.id
    )
    clients = {name: _client(user) for name, user in users.items()}
    return SimpleNamespace(workspace=workspace, users=users, api=clients, model=model)


def _checkpoint_of(owner):
    """A COMPLETED checkpoint of a new experiment of ``owner`` in the default workspace."""
    experiment = lifecycle.experiment_create(
        owner=owner, config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    return register_checkpoint(experiment.trials.get())


def _names(client: APIClient, query: str = "") -> list[str]:
    return [m["name"] for m in client.get(f"/api/v1/models/{query}").json()["results"]]


def test_creating_takes_a_workspace_id_or_name_and_needs_an_editor_there(team) -> None:
    editor, viewer, out = team.api["editor"], team.api["viewer"], team.api["out"]
    made = editor.post("/api/v1/models/", {"name": "by-id", "workspace": team.workspace.id})
    assert made.status_code == 201, made.content
    assert (made.json()["workspace_id"], made.json()["workspace_name"]) == (
        team.workspace.id,
        "team",
    )
    made = editor.post("/api/v1/models/", {"name": "by-name", "workspace": "team"}, format="json")
    assert made.status_code == 201 and made.json()["workspace_name"] == "team"
    plain = out.post("/api/v1/models/", {"name": "plain"}, format="json")
    assert plain.status_code == 201 and plain.json()["workspace_name"] == DEFAULT_NAME
    refused = viewer.post("/api/v1/models/", {"name": "v", "workspace": "team"}, format="json")
    assert refused.status_code == 403 and not RegisteredModel.objects.filter(name="v").exists()
    # Without a role, the workspace is unknown: the same 400 as for a name nobody uses.
    hidden = out.post("/api/v1/models/", {"name": "o", "workspace": "team"}, format="json")
    unknown = out.post("/api/v1/models/", {"name": "o", "workspace": "nope"}, format="json")
    assert hidden.status_code == unknown.status_code == 400
    assert hidden.json()["errors"]["workspace"] == ["No workspace named 'team'."]
    assert unknown.json()["errors"]["workspace"] == ["No workspace named 'nope'."]
    for bad in (True, 0, -1, 2**63, "", "a\x00b", [1], {"id": 1}, 1.5, None):
        answer = editor.post("/api/v1/models/", {"name": "bad", "workspace": bad}, format="json")
        assert answer.status_code == 400 and "workspace" in answer.json()["errors"], bad
    workspaces.workspace_set_archived(
        workspace=team.workspace, user=team.users["admin"], archived=True
    )
    archived = editor.post("/api/v1/models/", {"name": "a", "workspace": "team"}, format="json")
    assert archived.status_code == 400 and "archived" in archived.json()["errors"]["workspace"][0]
    # Names are unique across the installation: a hidden model's name is taken too (409).
    taken = out.post("/api/v1/models/", {"name": "team-model"}, format="json")
    assert taken.status_code == 409 and "name" in taken.json()["errors"]
    assert not RegisteredModel.objects.filter(name__in=["a", "bad", "o"]).exists()


def test_each_role_reads_and_changes_what_it_may(team) -> None:
    api, url = team.api, "/api/v1/models/team-model/"
    own = api["editor"].post("/api/v1/models/", {"name": "mine", "workspace": "team"})
    assert own.status_code == 201
    version = {"checkpoint_uuid": str(_checkpoint_of(team.users["editor"]).uuid)}
    answer = api["editor"].post("/api/v1/models/mine/versions/", version, format="json")
    assert answer.status_code == 201, answer.content
    # The outsider: 404 everywhere, absent from the list and the workspace filter.
    assert "team-model" not in _names(api["out"]) and "mine" not in _names(api["out"])
    assert _names(api["out"], f"?workspace={team.workspace.id}") == []
    for bad in ("abc", "0", "-1", "1.5", "99999999999999999999", ""):
        answer = api["out"].get("/api/v1/models/", {"workspace": bad})
        assert answer.status_code == 400 and "workspace" in answer.json()["errors"], bad
    for path in (url, url + "versions/", url + "versions/1/", url + "aliases/"):
        assert api["out"].get(path).status_code == 404, path
    assert api["out"].get("/api/v1/models/mine@latest/").status_code == 404
    assert api["out"].patch(url, {"description": "x"}, format="json").status_code == 404
    # The viewer reads but changes nothing.
    assert api["viewer"].get(url).json()["workspace_name"] == "team"
    assert _names(api["viewer"], f"?workspace={team.workspace.id}") == ["mine", "team-model"]
    assert api["viewer"].get("/api/v1/models/mine/versions/1/").status_code == 200
    assert api["viewer"].patch(url, {"description": "x"}, format="json").status_code == 403
    assert api["viewer"].delete("/api/v1/models/mine/").status_code == 403
    assert api["viewer"].put("/api/v1/models/mine/aliases/prod/", {"version": 1}).status_code == 403
    # The editor changes its own model, not the admin's; it registers only checkpoints it may
    # change, into models it may change.
    assert api["editor"].patch(url, {"description": "x"}, format="json").status_code == 403
    assert api["editor"].post(url + "versions/", version, format="json").status_code == 403
    others = {"checkpoint_uuid": str(_checkpoint_of(team.users["admin"]).uuid)}
    assert api["editor"].post("/api/v1/models/mine/versions/", others).status_code == 403
    assert api["editor"].put("/api/v1/models/mine/aliases/prod/", {"version": 1}).status_code == 200
    # The workspace admin changes anyone's model there; a site admin everything.
    assert api["admin"].patch("/api/v1/models/mine/", {"labels": ["a"]}).status_code == 200
    assert api["admin"].delete("/api/v1/models/mine/versions/1/").status_code == 204
    assert api["root"].patch(url, {"description": "root"}, format="json").status_code == 200
    assert RegisteredModel.objects.get(name="team-model").description == "root"
    assert ModelVersion.objects.filter(model__name="mine").count() == 0
    assert api["admin"].delete("/api/v1/models/mine/").status_code == 204


def test_moving_a_model_needs_the_right_to_change_it_in_both_workspaces(team) -> None:
    api = team.api
    made = api["editor"].post("/api/v1/models/", {"name": "mine", "workspace": "team"})
    assert made.status_code == 201
    url = "/api/v1/models/mine/"
    moved = api["editor"].patch(url, {"workspace": DEFAULT_NAME}, format="json")
    assert moved.status_code == 200 and moved.json()["workspace_name"] == DEFAULT_NAME
    back = api["editor"].patch(url, {"workspace": team.workspace.id}, format="json")
    assert back.status_code == 200 and back.json()["workspace_name"] == "team"
    solo = workspaces.workspace_create(owner=team.users["admin"], name="solo")
    refused = api["editor"].patch(url, {"workspace": "solo"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["workspace"] == ["No workspace named 'solo'."]
    grant(workspace=solo, actor=team.users["admin"], user="ws-editor", role="viewer")
    assert api["editor"].patch(url, {"workspace": "solo"}, format="json").status_code == 403
    # team's admin may change the model in team, but in the default workspace it is only an
    # editor, and the model is not its own there.
    assert api["admin"].patch(url, {"workspace": DEFAULT_NAME}).status_code == 403
    assert api["viewer"].patch(url, {"workspace": DEFAULT_NAME}).status_code == 403
    assert api["editor"].patch(url, {"workspace": 0}, format="json").status_code == 400
    assert RegisteredModel.objects.get(name="mine").workspace_id == team.workspace.id
    assert api["root"].patch(url, {"workspace": "solo"}, format="json").status_code == 200
    assert RegisteredModel.objects.get(name="mine").workspace_id == solo.id
    assert api["editor"].get(url).status_code == 200  # a viewer of solo now
    assert api["out"].get(url).status_code == 404


def test_the_dashboard_shows_a_model_only_to_its_workspace(team) -> None:
    def session(name: str) -> Client:
        client = Client()
        client.force_login(team.users[name])
        return client

    page = reverse("dashboard:model", args=["team-model"])
    out, viewer, editor = session("out"), session("viewer"), session("editor")
    assert out.get(page).status_code == 404
    assert 'id="model-team-model"' not in out.get(reverse("dashboard:models")).content.decode()
    archive = reverse("dashboard:model-archive", args=["team-model"])
    assert out.post(archive, {"archived": "true"}).status_code == 404
    html = viewer.get(page).content.decode()
    assert "team" in html and archive not in html  # no controls for a viewer
    listing = viewer.get(reverse("dashboard:models")).content.decode()
    assert 'id="model-team-model"' in listing
    assert f'<option value="{team.workspace.id}">' not in listing  # a viewer cannot create there
    assert viewer.post(archive, {"archived": "true"}).status_code == 302
    assert not RegisteredModel.objects.get(name="team-model").archived
    created = editor.post(
        reverse("dashboard:model-create"), {"name": "dash", "workspace": team.workspace.id}
    )
    assert created.status_code == 302
    assert RegisteredModel.objects.get(name="dash").workspace_id == team.workspace.id
    assert (
        f'<option value="{team.workspace.id}">'
        in editor.get(reverse("dashboard:models")).content.decode()
    )
    refused = viewer.post(
        reverse("dashboard:model-create"), {"name": "nope", "workspace": team.workspace.id}
    )
    assert refused.status_code == 302 and not RegisteredModel.objects.filter(name="nope").exists()


def test_register_as_model_creates_the_model_in_the_checkpoints_workspace(team) -> None:
    """The trial page's form: a new model lands where the experiment lives, not in the default
    workspace; a checkpoint the user cannot read creates nothing and names no workspace."""
    editor = team.users["editor"]
    project = workspaces.project_create(
        owner=team.users["admin"], workspace_id=team.workspace.id, name="vision"
    )
    experiment = lifecycle.experiment_create(
        owner=editor, config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    workspaces.experiment_move(experiment_id=experiment.id, project_id=project.id, user=editor)
    ckpt = register_checkpoint(experiment.trials.get())
    client = Client()
    client.force_login(editor)
    form = {"checkpoint": str(ckpt.uuid), "model": "from-trial"}
    assert client.post(reverse("dashboard:model-register"), form).status_code == 302
    model = RegisteredModel.objects.get(name="from-trial")
    assert model.workspace_id == team.workspace.id
    assert model.versions.get().checkpoint_id == ckpt.pk
    outsider = Client()
    outsider.force_login(team.users["out"])
    form = {"checkpoint": str(ckpt.uuid), "model": "by-outsider"}
    assert outsider.post(reverse("dashboard:model-register"), form).status_code == 302
    assert not RegisteredModel.objects.filter(name="by-outsider").exists()


@pytest.mark.parametrize(
    "endpoint", ["registered-models/search", "registered-models/get", "model-versions/search"]
)
def test_the_mlflow_api_names_no_model(team, endpoint: str) -> None:
    """MLflow's model registry is not mapped: its routes answer NOT_IMPLEMENTED to everyone,
    naming no model (Headway's REST model routes are the model registry)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {Token.objects.get(user=team.users['out'])}")
    answer = client.get(f"/api/2.0/mlflow/{endpoint}", {"name": "team-model"})
    assert answer.json()["error_code"] == "NOT_IMPLEMENTED"
    assert b"team-model" not in answer.content and b"ws-admin" not in answer.content


BEFORE = [("registry", "0029_workspace_roles")]
AFTER = [("registry", "0030_model_workspaces")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_puts_existing_models_into_the_default_workspace() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()  # every app: webhooks depends on registry
    executor.migrate(BEFORE)
    try:
        apps = executor.loader.project_state(BEFORE).apps
        owner = apps.get_model("auth", "User").objects.create(username="old-model-owner")
        old = apps.get_model("registry", "RegisteredModel").objects.create(
            owner_id=owner.id, name="old-model"
        )
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        moved = apps.get_model("registry", "RegisteredModel").objects.get(id=old.id)
        workspace = apps.get_model("registry", "Workspace").objects.get(id=moved.workspace_id)
        assert (workspace.name, workspace.immutable, workspace.everyone_role) == (
            DEFAULT_NAME,
            True,
            "editor",
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)


def test_a_refused_deletion_names_no_model_the_user_cannot_read(team) -> None:
    """A checkpoint held by a version of a model in a workspace where its owner has no role
    (here a site admin registered it into a private model): the 409 does not name the model."""
    checkpoint = _checkpoint_of(team.users["editor"])
    hideout = workspaces.workspace_create(owner=team.users["root"], name="hideout")
    hidden = model_registry.model_create(
        owner=team.users["root"], name="hidden-holder", workspace=hideout.id
    )
    model_registry.version_register(
        model=hidden, user=team.users["root"], checkpoint_uuid=checkpoint.uuid
    )
    url = f"/api/v1/checkpoints/{checkpoint.uuid}/"
    refused = team.api["editor"].delete(url)
    assert refused.status_code == 409 and b"hidden-holder" not in refused.content
    assert "a workspace you have no role in" in refused.json()["detail"]
    experiment = f"/api/v1/experiments/{checkpoint.trial.experiment_id}/"
    lifecycle.experiment_kill(experiment_id=checkpoint.trial.experiment_id)
    refused = team.api["editor"].delete(experiment)
    assert refused.status_code == 409 and b"hidden-holder" not in refused.content
    named = team.api["root"].delete(url)
    assert named.status_code == 409 and "hidden-holder v1" in named.json()["detail"]
