"""Workspaces and projects: the default project, config fields, moving and archiving
(``registry.workspaces`` through the lifecycle, the real database)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from registry import lifecycle
from registry.authz import Hidden, NotPermitted
from registry.errors import InvalidInput
from registry.models import DEFAULT_NAME, Experiment, Project, Workspace, default_project
from registry.workspace_roles import grant
from registry.workspaces import (
    Conflict,
    experiment_move,
    project_create,
    project_set_archived,
    workspace_create,
    workspace_set_archived,
)
from tests.helpers import TINY_CONFIG, TINY_MODEL

pytestmark = pytest.mark.django_db


def _create(owner, extra: str = ""):
    return lifecycle.experiment_create(
        owner=owner, config_source=TINY_CONFIG + extra, model_definition=TINY_MODEL
    )


@pytest.fixture
def team(user):
    workspace = workspace_create(owner=user, name="team")
    project = project_create(owner=user, workspace_id=workspace.id, name="vision")
    return workspace, project


def test_it_puts_a_config_without_workspace_or_project_into_the_default_project(user):
    experiment = _create(user)
    project = Experiment.objects.get(id=experiment.id).project
    assert project == default_project()
    assert project.name == DEFAULT_NAME and project.workspace.name == DEFAULT_NAME
    assert project.immutable and project.workspace.immutable


def test_a_config_may_name_the_default_project(user):
    named = f"workspace: {DEFAULT_NAME}\nproject: {DEFAULT_NAME}\n"
    assert _create(user, named).project == default_project()


def test_it_makes_the_default_project_once(user):
    assert default_project() == default_project()
    assert Workspace.objects.filter(name=DEFAULT_NAME).count() == 1
    assert Project.objects.filter(name=DEFAULT_NAME).count() == 1


def test_it_lands_a_config_naming_workspace_and_project_there(user, team):
    _, project = team
    experiment = _create(user, "workspace: team\nproject: vision\n")
    assert Experiment.objects.get(id=experiment.id).project_id == project.id
    assert experiment.config["workspace"] == "team" and experiment.config["project"] == "vision"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("workspace: nope\nproject: vision\n", "config.workspace"),
        ("workspace: team\nproject: nope\n", "config.project"),
        ("workspace: team\n", "config.project"),
        ("project: vision\n", "config.workspace"),
    ],
    ids=["unknown-workspace", "unknown-project", "workspace-alone", "project-alone"],
)
def test_it_refuses_an_unknown_place_naming_the_field(user, team, extra, field):
    with pytest.raises(InvalidInput) as caught:
        _create(user, extra)
    assert field in caught.value.errors, caught.value.errors
    assert not Experiment.objects.exists()


def test_it_refuses_new_experiments_in_an_archived_project_or_workspace(user, team):
    workspace, project = team
    project_set_archived(project=project, user=user, archived=True)
    with pytest.raises(InvalidInput) as caught:
        _create(user, "workspace: team\nproject: vision\n")
    assert "config.project" in caught.value.errors
    project_set_archived(project=project, user=user, archived=False)
    workspace_set_archived(workspace=workspace, user=user, archived=True)
    with pytest.raises(InvalidInput) as caught:
        _create(user, "workspace: team\nproject: vision\n")
    assert "config.workspace" in caught.value.errors
    with pytest.raises(InvalidInput) as caught:
        project_create(owner=user, workspace_id=workspace.id, name="more")
    assert "workspace" in caught.value.errors
    workspace_set_archived(workspace=workspace, user=user, archived=False)
    assert _create(user, "workspace: team\nproject: vision\n").project_id == project.id


def test_it_never_archives_the_default_workspace_or_project(django_user_model):
    admin = django_user_model.objects.create_user("root", is_staff=True)
    project = default_project()
    with pytest.raises(Conflict):
        project_set_archived(project=project, user=admin, archived=True)
    with pytest.raises(Conflict):
        workspace_set_archived(workspace=project.workspace, user=admin, archived=True)


def test_only_the_owner_or_an_admin_archives(user, team, django_user_model):
    workspace, project = team
    bob = django_user_model.objects.create_user("bob")
    # A new workspace is private: without a role it is not found at all.
    with pytest.raises(Hidden):
        workspace_set_archived(workspace=workspace, user=bob, archived=True)
    grant(workspace=workspace, actor=user, user="bob", role="editor")
    bob = django_user_model.objects.get(username="bob")
    with pytest.raises(NotPermitted):
        workspace_set_archived(workspace=workspace, user=bob, archived=True)
    with pytest.raises(NotPermitted):
        project_set_archived(project=project, user=bob, archived=True)
    # An editor adds a project to someone else's workspace; its workspace's admin archives it.
    bobs = project_create(owner=bob, workspace_id=workspace.id, name="bobs")
    project_set_archived(project=bobs, user=user, archived=True)
    with pytest.raises(NotPermitted):
        project_set_archived(project=default_project(), user=bob, archived=True)


def test_it_refuses_duplicate_names(user, team):
    workspace, _ = team
    with pytest.raises(Conflict) as caught:
        workspace_create(owner=user, name="team")
    assert "name" in caught.value.errors
    with pytest.raises(Conflict):
        workspace_create(owner=user, name=DEFAULT_NAME)
    with pytest.raises(Conflict):
        project_create(owner=user, workspace_id=workspace.id, name="vision")
    # The same project name in another workspace is another project.
    other = workspace_create(owner=user, name="other")
    assert project_create(owner=user, workspace_id=other.id, name="vision").name == "vision"


def test_it_moves_an_experiment_between_projects(user, team, django_user_model):
    _, project = team
    experiment = _create(user)
    moved = experiment_move(experiment_id=experiment.id, project_id=project.id, user=user)
    assert moved.project_id == project.id
    assert Experiment.objects.get(id=experiment.id).project_id == project.id
    experiment_move(experiment_id=experiment.id, project_id=default_project().id, user=user)
    assert Experiment.objects.get(id=experiment.id).project == default_project()
    bob = django_user_model.objects.create_user("bob")
    with pytest.raises(NotPermitted):
        experiment_move(experiment_id=experiment.id, project_id=default_project().id, user=bob)
    # A project in a workspace where bob has no role is unknown to him.
    with pytest.raises(InvalidInput):
        experiment_move(experiment_id=experiment.id, project_id=project.id, user=bob)


def test_it_refuses_moving_into_an_unknown_or_archived_project(user, team):
    workspace, project = team
    experiment = _create(user)
    for bad in (0, "1", True, 10**9):
        with pytest.raises(InvalidInput) as caught:
            experiment_move(experiment_id=experiment.id, project_id=bad, user=user)
        assert "project" in caught.value.errors
    workspace_set_archived(workspace=workspace, user=user, archived=True)
    with pytest.raises(InvalidInput) as caught:
        experiment_move(experiment_id=experiment.id, project_id=project.id, user=user)
    assert "project" in caught.value.errors
    assert Experiment.objects.get(id=experiment.id).project == default_project()


def test_continue_trial_lands_in_the_source_experiments_project(user, team):
    from tests.helpers import register_checkpoint
    from tests.helpers_checkpoints import end_trial

    _, project = team
    experiment = _create(user, "workspace: team\nproject: vision\n")
    trial = experiment.trials.get()
    end_trial(trial)
    register_checkpoint(trial)
    continued = lifecycle.trial_continue(trial_id=trial.id, owner=user)
    assert continued.project_id == project.id


def test_an_unmanaged_experiment_honours_the_config_fields(user, team):
    _, project = team
    started = lifecycle.unmanaged_start(
        owner=user, config_source={"name": "u", "workspace": "team", "project": "vision"}
    )
    assert started.experiment.project_id == project.id
    with pytest.raises(InvalidInput) as caught:
        lifecycle.unmanaged_start(owner=user, config_source={"workspace": "team"})
    assert "config.project" in caught.value.errors


BEFORE = [("registry", "0026_model_aliases")]
AFTER = [("registry", "0027_workspaces_projects")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_puts_existing_experiments_into_the_default_project():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()  # every app: webhooks depends on registry
    executor.migrate(BEFORE)
    try:
        apps = executor.loader.project_state(BEFORE).apps
        owner = apps.get_model("auth", "User").objects.create(username="old-owner")
        old = apps.get_model("registry", "Experiment").objects.create(owner_id=owner.id, config={})
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        moved = apps.get_model("registry", "Experiment").objects.get(id=old.id)
        project = apps.get_model("registry", "Project").objects.get(id=moved.project_id)
        assert (project.name, project.workspace.name) == (DEFAULT_NAME, DEFAULT_NAME)
        assert project.immutable and project.workspace.immutable
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
