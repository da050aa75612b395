"""Roles per workspace (``registry.authz``): a private workspace ``mx2-private`` whose admin is
``mx2-admin``; ``mx2-viewer`` and ``mx2-editor`` are bound there, ``mx2-outsider`` has no role.

Every API and dashboard route is requested by the outsider with the private workspace's
objects (its experiment, trial, checkpoint, project, and its model with a version and an alias):
object routes answer 404 (a hidden model exactly as an unknown one), and no answer names the
private experiment or model (0 cross-workspace reads), nothing changes (0 cross-workspace
writes). Then what each role may do; the model cases are in ``test_model_workspaces.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.authz_expectations import matrix_cases
from tests.authz_requests import (
    World,
    api_request,
    dashboard_request,
)
from tests.helpers import TINY_CONFIG, TINY_MODEL, b64, register_checkpoint, start_run

SECRET = "mx2-secret-experiment"
MODEL_SECRET = "mx2-secret-model-notes"
PRIVATE_CONFIG = TINY_CONFIG + "workspace: mx2-private\nproject: mx2-project\n"
# Routes that take one of the private workspace's objects in their URL.
_OBJECT_PREFIXES = ("experiment-", "trial-", "checkpoint-", "workspace-", "project-")
_DASHBOARD_OBJECTS = ("experiment", "trial", "workspace", "project", "view", "model")
# Dashboard routes named like a model's that take no model: the list's controls.
_DASHBOARD_NO_OBJECT = ("model-create", "model-register")


@pytest.fixture(scope="module")
def private(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[World]:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from registry import lifecycle, model_aliases, model_registry, workspace_roles, workspaces
    from registry.models import Experiment, Project, RegisteredModel, Workspace

    storage = tmp_path_factory.mktemp("roles-ckpt")
    config = PRIVATE_CONFIG + f"checkpoint_storage: {{type: shared_fs, host_path: {storage}}}\n"
    config = config.replace("name:", f"name: {SECRET} #", 1)
    with django_db_blocker.unblock():
        users_model = get_user_model()
        users = {
            name: users_model.objects.create_user(f"mx2-{name}")
            for name in ("admin", "viewer", "editor", "outsider")
        }
        users["owner"] = users["admin"]  # the private objects' owner (_api_request's "owner")
        workspace = workspaces.workspace_create(owner=users["admin"], name="mx2-private")
        project = workspaces.project_create(
            owner=users["admin"], workspace_id=workspace.id, name="mx2-project"
        )
        for role in ("viewer", "editor"):
            workspace_roles.grant(
                workspace=workspace, actor=users["admin"], user=f"mx2-{role}", role=role
            )
        experiment = lifecycle.experiment_create(
            owner=users["admin"], config_source=config, model_definition=TINY_MODEL
        )
        assert experiment.project_id == project.id and experiment.name.startswith(SECRET)
        trial = experiment.trials.get()
        run = start_run(trial)
        checkpoint = register_checkpoint(trial, run_id=run.run_id)
        trial.refresh_from_db()
        model = model_registry.model_create(
            owner=users["admin"],
            name="mx2-model",
            workspace="mx2-private",
            description=MODEL_SECRET,
        )
        model_registry.version_register(
            model=model, user=users["admin"], checkpoint_uuid=checkpoint.uuid
        )
        model_aliases.alias_set(model=model, alias="champion", version=1, user=users["admin"])
        tokens = {
            name: Token.objects.create(user=user).key
            for name, user in users.items()
            if name != "owner"
        }
        yield World(
            users, tokens, experiment, trial, checkpoint, model, experiment, workspace, project
        )
        RegisteredModel.objects.filter(name="mx2-model").delete()
        Experiment.objects.filter(owner__username__startswith="mx2-").delete()
        Project.objects.filter(owner__username__startswith="mx2-").delete()
        Workspace.objects.filter(owner__username__startswith="mx2-").delete()
        users_model.objects.filter(username__startswith="mx2-").delete()


def _private_state(world: World) -> tuple:
    """The private workspace's rows a request might change (creating elsewhere is allowed)."""
    from registry.models import (
        Checkpoint,
        Experiment,
        MetricReport,
        ModelAlias,
        ModelVersion,
        Project,
        RegisteredModel,
        RoleBinding,
        Trial,
    )

    here = {"project__workspace": world.workspace}
    in_models = {"model__workspace": world.workspace}
    return (
        list(
            RegisteredModel.objects.filter(workspace=world.workspace).values_list(
                "id", "archived", "description", "labels", "workspace_id"
            )
        ),
        list(ModelVersion.objects.filter(**in_models).values_list("id", "comment", "labels")),
        list(ModelAlias.objects.filter(**in_models).values_list("id", "alias", "version_id")),
        list(Experiment.objects.filter(**here).values_list("id", "state", "archived", "notes")),
        list(
            Trial.objects.filter(experiment__project__workspace=world.workspace).values_list(
                "id", "state", "run_id", "progress", "notes"
            )
        ),
        list(Checkpoint.objects.filter(trial=world.trial).values_list("uuid", "state")),
        list(Project.objects.filter(workspace=world.workspace).values_list("id", "archived")),
        list(RoleBinding.objects.filter(workspace=world.workspace).values_list("id", "role")),
        MetricReport.objects.filter(trial=world.trial).count(),
    )


def _api(world: World, principal: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.tokens[principal]}")
    return client


def _session(world: World, principal: str) -> Client:
    client = Client()
    client.force_login(world.users[principal])
    return client


@pytest.mark.parametrize(
    ("route", "method", "action"),
    matrix_cases(),
    ids=lambda v: v if isinstance(v, str) else "-",
)
def test_an_outsider_reads_and_changes_nothing_in_a_private_workspace(
    private: World, db, route: str, method: str, action: str | None
) -> None:
    namespace, name = route.split(":")
    before = _private_state(private)
    if namespace == "registry-api":
        url, body = api_request(private, name, method)
        response = getattr(_api(private, "outsider"), method)(url, body, format="json")
        takes_object = name.startswith(_OBJECT_PREFIXES) and not name.endswith("-list")
        if name.startswith("model-") and name != "model-list":
            takes_object = True
            # A hidden model answers exactly as a model that does not exist.
            unknown = url.replace(private.model.name, "mx2-nomodel")
            answer = getattr(_api(private, "outsider"), method)(unknown, body, format="json")
            assert (response.status_code, response.content) == (
                answer.status_code,
                answer.content.replace(b"mx2-nomodel", private.model.name.encode()),
            ), f"{method.upper()} {url}: a hidden model answers unlike an unknown one"
    else:
        url, data = dashboard_request(private, name, action)
        if name == "experiments-live":  # ids in the query: the private one is left out
            url += f"?id={private.experiment.id}"
        response = getattr(_session(private, "outsider"), method)(url, data)
        takes_object = name.split("-")[0] in _DASHBOARD_OBJECTS and name not in _DASHBOARD_NO_OBJECT
    what = f"{method.upper()} {url} as the outsider: {response.status_code}"
    if takes_object:
        assert response.status_code == 404, what
    content = b"".join(response) if response.streaming else response.content
    hidden = {
        "experiment-list": private.experiment.id,
        "trial-list": private.trial.id,
        "workspace-list": private.workspace.id,
        "project-list": private.project.id,
        "model-list": private.model.id,
    }.get(name)
    if hidden is not None and method == "get":
        assert hidden not in [row["id"] for row in response.json()["results"]], what
    if name == "experiments-live":
        assert response.json()["experiments"] == [], what
    assert SECRET.encode() not in content, f"{what} names the private experiment"
    assert b"mx2-private" not in content, f"{what} names the private workspace"
    assert MODEL_SECRET.encode() not in content, f"{what} shows the private model"
    if name.startswith("model") and name != "model-register":  # its version's checkpoint
        assert str(private.checkpoint.uuid).encode() not in content, f"{what} names it"
    assert _private_state(private) == before, f"{what} changed the private workspace"


def test_a_viewer_reads_but_does_not_change(private: World, db) -> None:
    viewer, e = _api(private, "viewer"), private.experiment
    assert viewer.get(f"/api/v1/experiments/{e.id}/").status_code == 200
    assert viewer.get(f"/api/v1/trials/{private.trial.id}/logs/").status_code == 200
    ids = [row["id"] for row in viewer.get("/api/v1/experiments/").json()["results"]]
    assert e.id in ids
    assert viewer.post(f"/api/v1/experiments/{e.id}/archive/").status_code == 403
    body = {"config": PRIVATE_CONFIG, "model_definition": b64(TINY_MODEL)}
    assert viewer.post("/api/v1/experiments/", body, format="json").status_code == 403
    outsider_ids = [
        row["id"] for row in _api(private, "outsider").get("/api/v1/experiments/").json()["results"]
    ]
    assert e.id not in outsider_ids
    page = _session(private, "viewer").get(f"/experiments/{e.id}/").content.decode()
    assert SECRET in page and "/control/pause" not in page


def test_an_editor_creates_and_changes_its_own_and_a_workspace_admin_any(
    private: World, db
) -> None:
    editor, admin = _api(private, "editor"), _api(private, "admin")
    body = {"config": PRIVATE_CONFIG, "model_definition": b64(TINY_MODEL)}
    made = editor.post("/api/v1/experiments/", body, format="json")
    assert made.status_code == 201, made.content
    own, theirs, notes = made.json()["id"], private.experiment.id, {"notes": "changed"}
    assert editor.patch(f"/api/v1/experiments/{own}/", notes, format="json").status_code == 200
    assert editor.patch(f"/api/v1/experiments/{theirs}/", notes, format="json").status_code == 403
    assert editor.post(f"/api/v1/experiments/{theirs}/pause/").status_code == 403
    assert (
        admin.patch(f"/api/v1/experiments/{own}/", {"notes": "x"}, format="json").status_code == 200
    )
    page = _session(private, "admin").get(f"/experiments/{own}/").content.decode()
    assert "/control/" in page  # a workspace admin sees the controls of anyone's experiment


def test_groups_bindings_everyone_role_and_validation(private: World, db) -> None:
    from django.contrib.auth.models import Group

    admin, outsider = _api(private, "admin"), _api(private, "outsider")
    members = f"/api/v1/workspaces/{private.workspace.id}/members/"
    team = Group.objects.create(name="mx2-team")
    private.users["outsider"].groups.add(team)
    granted = admin.post(members, {"group": "mx2-team", "role": "viewer"}, format="json")
    assert granted.status_code == 201 and granted.json()["group"] == "mx2-team"
    assert outsider.get(f"/api/v1/experiments/{private.experiment.id}/").status_code == 200
    assert admin.delete(f"{members}{granted.json()['id']}/").status_code == 204
    assert outsider.get(f"/api/v1/experiments/{private.experiment.id}/").status_code == 404
    detail = f"/api/v1/workspaces/{private.workspace.id}/"
    assert (
        admin.patch(detail, {"everyone_role": "viewer"}, format="json").json()["everyone_role"]
        == "viewer"
    )
    assert outsider.get(f"/api/v1/experiments/{private.experiment.id}/").status_code == 200
    escalate = {"user": "mx2-outsider", "role": "admin"}
    assert outsider.post(members, escalate, format="json").status_code == 403
    for body, field in (
        ({"user": "mx2-nobody", "role": "viewer"}, "user"),
        ({"group": "mx2-none", "role": "viewer"}, "group"),
        ({"user": "mx2-viewer", "role": "owner"}, "role"),
        ({"user": "mx2-viewer", "group": "mx2-team", "role": "viewer"}, "user"),
        ({"role": "viewer"}, "user"),
    ):
        refused = admin.post(members, body, format="json")
        assert refused.status_code == 400 and field in refused.json()["errors"], (body, refused)
    refused = admin.patch(detail, {"everyone_role": "admin"}, format="json")
    assert refused.status_code == 400 and "everyone_role" in refused.json()["errors"]
    assert admin.delete(f"{members}999999/").status_code == 404


def test_an_installation_without_roles_behaves_as_before(db, django_user_model) -> None:
    """The default workspace: every logged-in user is an editor there."""
    from registry import authz
    from registry.models import default_project

    workspace = default_project().workspace
    assert workspace.everyone_role == "editor"
    anyone = django_user_model.objects.create_user("mx2-anyone")
    assert authz.role_in(anyone, workspace.id) == "editor"
    staff = django_user_model.objects.create_user("mx2-staff", is_staff=True)
    assert authz.role_in(staff, workspace.id) == "admin"
