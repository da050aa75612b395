"""``headway workspace ...``, ``headway project ...`` and ``headway experiment move`` against a
live registry (pytest-django's live server), and ``experiment create`` honouring the config's
``workspace`` / ``project``."""

from __future__ import annotations

import pytest

from headway.cli.main import main
from registry.models import DEFAULT_NAME, Experiment, Project, Workspace
from tests.helpers import TINY_CONFIG, create_experiment

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(api, live_server, tmp_path, monkeypatch) -> str:
    """The live server's URL, with alice's token in ``$HEADWAY_TOKEN``."""
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HEADWAY_TOKEN", api.token)
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return live_server.url


def _cli(server: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--master", server, *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_workspaces_and_projects_from_the_command_line(server, api, capsys) -> None:
    code, out, _ = _cli(server, capsys, "workspace", "create", "team")
    assert code == 0 and out.startswith("Created workspace 'team'")
    code, out, _ = _cli(server, capsys, "project", "create", "vision", "--workspace", "team")
    assert code == 0 and "in workspace 'team'" in out
    project = Project.objects.get(name="vision")
    assert project.workspace.name == "team"
    assert project.owner is not None and project.owner.username == "alice"

    code, out, _ = _cli(server, capsys, "workspace", "list")
    names = [line.split()[1] for line in out.splitlines()[2:]]
    assert code == 0 and names == [DEFAULT_NAME, "team"]
    code, out, _ = _cli(server, capsys, "workspace", "describe", "team")
    assert code == 0 and "vision" in out

    experiment_id = create_experiment(api).json()["id"]
    code, out, _ = _cli(server, capsys, "experiment", "move", str(experiment_id), "-p", "vision")
    assert (code, out) == (
        0,
        f"Moved experiment {experiment_id} to project 'vision' in workspace 'team'",
    )
    assert Experiment.objects.get(id=experiment_id).project_id == project.id
    code, out, _ = _cli(server, capsys, "experiment", "describe", str(experiment_id))
    assert code == 0 and "project:" in out and "team / vision" in out
    code, out, _ = _cli(server, capsys, "project", "describe", "vision", "-w", "team")
    assert code == 0 and str(experiment_id) in out.splitlines()[-1]

    code, out, _ = _cli(server, capsys, "project", "archive", "vision")
    assert (code, out) == (0, "Project 'vision' archived")
    code, out, _ = _cli(server, capsys, "project", "list")
    assert "vision" not in out
    code, out, _ = _cli(server, capsys, "project", "list", "--all", "--workspace", "team")
    assert "vision" in out
    code, _, err = _cli(
        server, capsys, "experiment", "move", str(experiment_id), "-p", DEFAULT_NAME
    )
    assert code == 0
    code, _, err = _cli(server, capsys, "experiment", "move", str(experiment_id), "-p", "vision")
    assert code == 1 and "archived" in err
    assert _cli(server, capsys, "project", "unarchive", "vision")[0] == 0

    code, out, _ = _cli(server, capsys, "workspace", "archive", "team")
    assert (code, out) == (0, "Workspace 'team' archived")
    assert Workspace.objects.get(name="team").archived
    code, _, err = _cli(server, capsys, "project", "create", "late", "--workspace", "team")
    assert code == 1 and "archived" in err
    assert _cli(server, capsys, "workspace", "unarchive", "team")[0] == 0


def test_unknown_and_duplicate_names_are_errors(server, capsys) -> None:
    code, _, err = _cli(server, capsys, "project", "describe", "nope")
    assert code == 1 and "no project named 'nope'" in err
    code, _, err = _cli(server, capsys, "project", "create", "p", "--workspace", "nope")
    assert code == 1 and "no workspace named 'nope'" in err
    assert _cli(server, capsys, "workspace", "create", "a")[0] == 0
    code, _, err = _cli(server, capsys, "workspace", "create", "a")
    assert code == 1 and "already exists" in err
    assert _cli(server, capsys, "workspace", "create", "b")[0] == 0
    for workspace in ("a", "b"):
        assert _cli(server, capsys, "project", "create", "same", "-w", workspace)[0] == 0
    code, _, err = _cli(server, capsys, "project", "describe", "same")
    assert code == 1 and "give --workspace" in err
    # The default workspace has no owner: only an admin changes it (and never archives it).
    code, _, err = _cli(server, capsys, "workspace", "archive", DEFAULT_NAME)
    assert code == 1 and "or an admin" in err


def test_experiment_create_lands_in_the_configs_project(server, capsys, tmp_path) -> None:
    assert _cli(server, capsys, "workspace", "create", "team")[0] == 0
    assert _cli(server, capsys, "project", "create", "vision", "-w", "team")[0] == 0
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model_def.py").write_text("class TinyTrial:\n    pass\n")
    config = tmp_path / "exp.yaml"
    config.write_text(TINY_CONFIG + "workspace: team\nproject: vision\n")
    code, _, err = _cli(server, capsys, "experiment", "create", str(config), str(model_dir))
    assert code == 0, err
    assert Experiment.objects.get().project.name == "vision"
    config.write_text(TINY_CONFIG + "workspace: team\nproject: nope\n")
    code, _, err = _cli(server, capsys, "experiment", "create", str(config), str(model_dir))
    assert code == 1 and "config.project" in err


def test_workspace_roles_from_the_command_line(server, capsys, django_user_model) -> None:
    from django.contrib.auth.models import Group

    django_user_model.objects.create_user("bob")
    Group.objects.create(name="ml-team")
    assert _cli(server, capsys, "workspace", "create", "team")[0] == 0
    code, out, _ = _cli(
        server, capsys, "workspace", "grant", "team", "--user", "bob", "-r", "viewer"
    )
    assert (code, out) == (0, "bob is viewer in workspace 'team'.")
    code, out, _ = _cli(
        server, capsys, "workspace", "grant", "team", "--group", "ml-team", "--role", "editor"
    )
    assert (code, out) == (0, "ml-team is editor in workspace 'team'.")
    code, out, _ = _cli(server, capsys, "workspace", "members", "team")
    rows = [line.split() for line in out.splitlines()[2:-1]]
    assert code == 0 and rows == [
        ["alice", "user", "admin"],
        ["bob", "user", "viewer"],
        ["ml-team", "group", "editor"],
    ]
    assert out.splitlines()[-1] == "Everyone else: no role"
    code, out, _ = _cli(server, capsys, "workspace", "revoke", "team", "--user", "bob")
    assert (code, out) == (0, "Removed user 'bob''s role in workspace 'team'.")
    code, _, err = _cli(server, capsys, "workspace", "revoke", "team", "--user", "bob")
    assert code != 0 and "no role" in err
    # An unknown user is refused by the registry, naming the field.
    code, _, err = _cli(
        server, capsys, "workspace", "grant", "team", "-u", "nobody", "-r", "viewer"
    )
    assert code != 0 and "user" in err
