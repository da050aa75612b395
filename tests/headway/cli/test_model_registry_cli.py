"""``headway model create|list|describe|register|download`` against a live registry
(pytest-django's live server), and ``headway.experimental.client``'s model calls."""

from __future__ import annotations

import pathlib

import pytest

from headway.cli.main import main
from headway.client import BadRequestError, NotFoundError
from headway.experimental import client
from registry.models import ModelVersion
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

FILES = {"state-dict.pth": b"\x01w" * 64, "nested/extra.json": b"{}"}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stored(api, live_server, tmp_path, monkeypatch) -> tuple[str, list[str]]:
    """The live server's URL (alice's token in ``$HEADWAY_TOKEN``) and two checkpoints of one
    trial whose files are in shared_fs storage (steps 10 and 20)."""
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HEADWAY_TOKEN", api.token)
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path / "storage")})
    uuids = [store_over_rest(api, trial, FILES, steps) for steps in (10, 20)]
    return live_server.url, uuids


def _cli(server: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--master", server, *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_create_register_describe_list_and_download(stored, capsys, tmp_path) -> None:
    server, (first, second) = stored
    assert _cli(server, capsys, "model", "create", "digits", "-d", "CNN", "-l", "prod") == (
        0,
        "Model digits created in workspace Uncategorized",
        "",
    )
    code, out, _ = _cli(server, capsys, "model", "register", "digits", first)
    assert (code, out) == (0, f"Registered checkpoint {first} as digits version 1")
    # Determined's name for the same command.
    code, out, _ = _cli(server, capsys, "m", "register-version", "digits", second, "-c", "best")
    assert (code, out) == (0, f"Registered checkpoint {second} as digits version 2")
    assert ModelVersion.objects.get(version=2).comment == "best"

    code, out, _ = _cli(server, capsys, "model", "list")
    assert code == 0
    header, _, row = out.splitlines()
    assert header.split()[:3] == ["name", "versions", "latest"]
    assert row.split()[:4] == ["digits", "2", "2", "prod"]

    code, out, _ = _cli(server, capsys, "model", "describe", "digits")
    assert code == 0 and "description: CNN" in out
    versions = out.split("Versions:")[1].strip().splitlines()
    assert versions[2].split()[:2] == ["2", second] and versions[3].split()[:2] == ["1", first]

    # Latest version by default, or --version N; the checkpoint download's code path.
    code, out, _ = _cli(server, capsys, "model", "download", "digits", "-o", str(tmp_path / "a"))
    assert code == 0 and pathlib.Path(out) == (tmp_path / "a").resolve()
    assert (tmp_path / "a" / "state-dict.pth").read_bytes() == FILES["state-dict.pth"]
    assert (tmp_path / "a" / "nested" / "extra.json").read_bytes() == b"{}"
    code, out, _ = _cli(
        server, capsys, "model", "download", "digits", "--version", "1", "-o", str(tmp_path / "b")
    )
    assert code == 0 and (tmp_path / "b" / "state-dict.pth").exists()


def test_errors_are_one_line_naming_the_problem(stored, capsys) -> None:
    server, (first, _) = stored
    code, _, err = _cli(server, capsys, "model", "create", "bad name")
    assert code == 1 and err.startswith("error: ") and "name" in err
    _cli(server, capsys, "model", "create", "digits")
    code, _, err = _cli(server, capsys, "model", "create", "digits")
    assert code == 1 and "already exists" in err
    code, _, err = _cli(server, capsys, "model", "register", "digits", "not-a-uuid")
    assert code == 1 and "checkpoint_uuid" in err
    code, _, err = _cli(server, capsys, "model", "register", "nope", first)
    assert code == 1 and "nope" in err
    code, _, err = _cli(server, capsys, "model", "download", "digits")
    assert code == 1 and err == "error: model digits has no versions"
    code, _, err = _cli(server, capsys, "model", "download", "digits", "--version", "0")
    assert code == 2 and "--version" in err
    code, _, err = _cli(server, capsys, "model", "describe", "a/b")
    assert code == 1 and err.startswith("error: ")


def test_the_python_client_uses_determined_names(stored, live_server, tmp_path) -> None:
    _, (first, second) = stored
    client.login(master=live_server.url)
    model = client.create_model("digits", description="CNN", labels=["prod"])
    assert model.name == "digits" and model.labels == ["prod"]
    v1 = model.register_version(first)
    v2 = client.get_model("digits").register_version(second)
    assert (v1.model_version, v2.model_version) == (1, 2)
    assert client.get_model("digits").get_version().model_version == 2
    version = client.get_model("digits").get_version(1)
    assert version.checkpoint.uuid == first and version.checkpoint.steps_completed == 10
    path = version.checkpoint.download(tmp_path / "dl")
    assert pathlib.Path(path, "state-dict.pth").read_bytes() == FILES["state-dict.pth"]
    assert [v.model_version for v in model.get_versions()] == [2, 1]
    assert [m.name for m in client.list_models()] == ["digits"]
    with pytest.raises(NotFoundError):
        client.get_model("nope")
    with pytest.raises(NotFoundError):
        model.get_version(9)
    with pytest.raises(BadRequestError):
        client.create_model("no spaces allowed")


def test_a_model_in_a_private_workspace_is_unknown_to_a_user_without_a_role(
    stored, capsys, monkeypatch, django_user_model, tmp_path
) -> None:
    """``--workspace`` puts the model there; another user's CLI neither lists nor finds it
    (describe, download, aliases), and its own ``create`` of the name is refused as taken."""
    from rest_framework.authtoken.models import Token

    from registry import workspaces

    server, (first, _) = stored
    alice = django_user_model.objects.get(username="alice")
    workspaces.workspace_create(owner=alice, name="private-ws")
    code, out, _ = _cli(server, capsys, "model", "create", "secret", "-w", "private-ws")
    assert (code, out) == (0, "Model secret created in workspace private-ws")
    assert _cli(server, capsys, "model", "register", "secret", first)[0] == 0
    code, out, _ = _cli(server, capsys, "model", "list", "--workspace", "private-ws")
    assert code == 0 and out.splitlines()[2].split()[:5] == ["secret", "1", "1", "-", "private-ws"]
    bob = django_user_model.objects.create_user("bob")
    monkeypatch.setenv("HEADWAY_TOKEN", Token.objects.create(user=bob).key)
    code, out, _ = _cli(server, capsys, "model", "list")
    assert code == 0 and "secret" not in out
    for argv in (
        ("model", "describe", "secret"),
        ("model", "describe", "secret@latest"),
        ("model", "download", "secret", "-o", str(tmp_path / "x")),
        ("model", "alias", "list", "secret"),
        ("model", "register", "secret", first),
    ):
        code, out, err = _cli(server, capsys, *argv)
        assert code == 1 and err.endswith("HTTP 404: No model named 'secret'."), (argv, err)
        assert first not in out + err
    assert not (tmp_path / "x").exists()
    code, _, err = _cli(server, capsys, "model", "create", "other", "-w", "private-ws")
    assert code == 1 and "workspace" in err and "No workspace named 'private-ws'" in err
    code, _, err = _cli(server, capsys, "model", "create", "secret")
    assert code == 1 and "already exists" in err
