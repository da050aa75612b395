"""``headway model alias set|delete|list`` and ``NAME@ALIAS`` in ``describe`` and ``download``,
against a live registry (pytest-django's live server)."""

from __future__ import annotations

import json
import pathlib

import pytest

from headway.cli.main import main
from headway.client import BadRequestError, NotFoundError
from headway.experimental import client
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

FILES = {"state-dict.pth": b"\x02v" * 32}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(api, live_server, tmp_path, monkeypatch) -> tuple[str, list[str]]:
    """The live server's URL (alice's token in ``$HEADWAY_TOKEN``) and model ``digits`` with
    versions 1 and 2 (checkpoints of steps 10 and 20)."""
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HEADWAY_TOKEN", api.token)
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path / "storage")})
    uuids = [store_over_rest(api, trial, FILES, steps) for steps in (10, 20)]
    assert main(["--master", live_server.url, "model", "create", "digits"]) == 0
    for uuid in uuids:
        assert main(["--master", live_server.url, "model", "register", "digits", uuid]) == 0
    return live_server.url, uuids


def _cli(server: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(["--master", server, *argv])
    except SystemExit as exc:  # argparse's refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_set_move_list_history_describe_download_delete(server, capsys, tmp_path) -> None:
    url, (_, second) = server
    assert _cli(url, capsys, "model", "alias", "set", "digits", "champion", "1")[:2] == (
        0,
        "digits@champion -> version 1",
    )
    assert _cli(url, capsys, "model", "alias", "set", "digits", "champion", "2")[:2] == (
        0,
        "digits@champion -> version 2",
    )
    code, out, _ = _cli(url, capsys, "model", "alias", "list", "digits")
    assert code == 0
    header, _, row = out.splitlines()
    assert header.split() == ["alias", "version", "set_by", "updated"]
    assert row.split()[:3] == ["champion", "2", "alice"]

    code, out, _ = _cli(url, capsys, "model", "alias", "list", "digits", "--history", "--json")
    events = json.loads(out)
    assert code == 0
    assert [(e["action"], e["from_version"], e["to_version"]) for e in events] == [
        ("MOVE", 1, 2),
        ("SET", None, 1),
    ]

    code, out, _ = _cli(url, capsys, "model", "describe", "digits@champion")
    fields = dict(line.split(":", 1) for line in out.splitlines())
    fields = {key: value.strip() for key, value in fields.items()}
    assert code == 0 and fields["version"] == "2" and fields["checkpoint"] == second
    assert fields["aliases"] == "champion" and fields["model"] == "digits"
    code, out, _ = _cli(url, capsys, "model", "describe", "digits")
    versions = out.split("Versions:")[1].strip().splitlines()
    assert versions[2].split()[0] == "2" and versions[2].split()[-1] == "champion"

    target = tmp_path / "champ"
    code, out, _ = _cli(url, capsys, "model", "download", "digits@champion", "-o", str(target))
    assert code == 0 and pathlib.Path(out) == target.resolve()
    assert (target / "state-dict.pth").read_bytes() == FILES["state-dict.pth"]

    assert _cli(url, capsys, "model", "alias", "delete", "digits", "champion")[:2] == (
        0,
        "Deleted digits@champion",
    )
    code, out, _ = _cli(url, capsys, "model", "alias", "list", "digits", "--history")
    assert code == 0 and out.splitlines()[2].split()[:4] == ["champion", "DELETE", "2", "-"]


def test_errors_name_the_problem(server, capsys) -> None:
    url, _ = server
    code, _, err = _cli(url, capsys, "model", "alias", "set", "digits", "9bad", "1")
    assert code == 1 and err.startswith("error: ") and "alias" in err
    code, _, err = _cli(url, capsys, "model", "alias", "set", "digits", "champion", "7")
    assert code == 1 and "version" in err and "7" in err
    code, _, err = _cli(url, capsys, "model", "alias", "set", "nope", "champion", "1")
    assert code == 1 and "nope" in err
    code, _, err = _cli(url, capsys, "model", "alias", "set", "digits", "champion", "x")
    assert code == 2 and "version" in err
    code, _, err = _cli(url, capsys, "model", "alias", "delete", "digits", "champion")
    assert code == 1 and "champion" in err
    code, _, err = _cli(url, capsys, "model", "describe", "digits@champion")
    assert code == 1 and "no alias 'champion'" in err
    code, _, err = _cli(url, capsys, "model", "download", "digits@")
    assert code == 2 and "NAME@ALIAS" in err
    code, _, err = _cli(url, capsys, "model", "download", "digits@latest", "--version", "1")
    assert code == 2 and "not both" in err
    code, _, err = _cli(url, capsys, "model", "alias", "list", "nope")
    assert code == 1 and "nope" in err


def test_the_python_client_sets_resolves_and_deletes_aliases(server) -> None:
    url, (first, _) = server
    client.login(master=url)
    model = client.get_model("digits")
    model.set_alias("champion", 1)
    found = model.get_version_by_alias("champion")
    assert (found.model_version, found.checkpoint.uuid) == (1, first)
    assert model.get_version_by_alias("latest").model_version == 2
    with pytest.raises(BadRequestError):
        model.set_alias("champion", 9)
    model.delete_alias("champion")
    with pytest.raises(NotFoundError):
        model.get_version_by_alias("champion")
    with pytest.raises(NotFoundError):
        model.delete_alias("champion")
