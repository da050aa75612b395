"""``headway checkpoint download`` against a live server: per-file download, resume, size checks
against the registry's ``resources``, archives, and the progress bar; each through the registry
(``--mode master``) and straight from the mounted shared file system (``--mode direct``), and
``--mode auto`` choosing between them."""

from __future__ import annotations

import os
import tarfile
import uuid
import zipfile

import pytest

from headway.cli.main import main
from headway.client import RegistryAPI
from headway.storage import build_storage_manager
from registry.models import Trial
from tests.helpers import TINY_CONFIG, create_experiment
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

pytestmark = pytest.mark.django_db(transaction=True)

FILES = {
    "state.pth": os.urandom((1 << 20) * 2 + 77),
    "code/model_def.py": b"x = 1\n",
    "code/deep/er/notes.txt": b"nested",
    "empty.bin": b"",
}


@pytest.fixture
def cli(live_server, api, monkeypatch, tmp_path):
    """The CLI pointed at the live server with alice's token."""
    monkeypatch.setenv("HEADWAY_MASTER", live_server.url)
    monkeypatch.setenv("HEADWAY_TOKEN", api.token)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    return main


@pytest.fixture
def register(api, tmp_path):
    """``register(files, resources=None) -> uuid``: store files on shared_fs and register them
    (``resources`` overrides what the registry is told)."""
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "storage")}
    response = create_experiment(api, config=TINY_CONFIG + f"checkpoint_storage: {storage}\n")
    trial = Trial.objects.get(experiment_id=response.json()["id"])
    manager = build_storage_manager(storage)

    def _register(files: dict[str, bytes], resources: dict | None = None) -> str:
        return store_over_rest(api, trial, files, 1, resources=resources)

    _register.manager = manager
    return _register


def read_tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def served(monkeypatch) -> list[str]:
    """The files the registry was asked to serve (``RegistryAPI.checkpoint_download`` calls,
    each still made)."""
    calls: list[str] = []
    real = RegistryAPI.checkpoint_download

    def counted(self, uuid, **params):
        calls.append(params.get("path") or params.get("format"))
        return real(self, uuid, **params)

    monkeypatch.setattr(RegistryAPI, "checkpoint_download", counted)
    return calls


MODES = ["master", "direct"]


@pytest.mark.parametrize("mode", MODES)
def test_it_downloads_every_file_into_the_directory(cli, register, tmp_path, capsys, served, mode):
    storage_id = register(FILES)
    out = tmp_path / "out"
    assert cli(["checkpoint", "download", storage_id, "-o", str(out), "--mode", mode]) == 0
    assert read_tree(out) == FILES
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out.resolve())
    assert captured.err == ""  # no progress bar when stderr is not a terminal
    assert sorted(served) == (sorted(FILES) if mode == "master" else [])


def test_auto_copies_from_a_mounted_shared_fs_without_the_registry_serving_a_byte(
    cli, register, tmp_path, served
):
    storage_id = register(FILES)
    out = tmp_path / "out"
    assert cli(["checkpoint", "download", storage_id, "-o", str(out)]) == 0  # --mode auto
    assert read_tree(out) == FILES
    assert served == []


@pytest.mark.parametrize("checkpoint_storage", ["s3"], indirect=True)
def test_auto_goes_through_the_registry_for_s3_and_direct_says_why_not(
    cli, api, checkpoint_storage, tmp_path, served, capsys
):
    storage_id = store_over_rest(api, trial_on_storage(api, checkpoint_storage), FILES, 1)
    out = tmp_path / "out"
    assert cli(["checkpoint", "download", storage_id, "-o", str(out)]) == 0
    assert read_tree(out) == FILES
    assert sorted(served) == sorted(FILES)
    capsys.readouterr()
    assert cli(["checkpoint", "download", storage_id, "-o", str(out), "--mode", "direct"]) == 1
    err = capsys.readouterr().err
    assert "--mode direct" in err and "s3 storage" in err


def test_direct_with_an_archive_format_is_refused(cli, register, tmp_path, capsys):
    storage_id = register(FILES)
    argv = ["checkpoint", "download", storage_id, "--format", "tar", "--mode", "direct"]
    assert cli([*argv, "-o", str(tmp_path / "a.tar")]) == 1
    assert "--mode direct" in capsys.readouterr().err
    assert not (tmp_path / "a.tar").exists()


@pytest.mark.parametrize("mode", MODES)
def test_it_resumes_partial_files_and_skips_complete_ones(cli, register, tmp_path, mode):
    storage_id = register(FILES)
    out = tmp_path / "out"
    (out / "code").mkdir(parents=True)
    # A partial state.pth whose first bytes are not the real ones: a resumed download appends
    # the rest with a Range request instead of fetching the file again.
    (out / "state.pth").write_bytes(b"P" * 1000)
    (out / "code" / "model_def.py").write_bytes(b"y = 2\n")  # the registered size: kept as is
    (out / "empty.bin").write_bytes(b"too long")  # longer than registered: fetched again
    assert cli(["checkpoint", "download", storage_id, "-o", str(out), "--mode", mode]) == 0
    tree = read_tree(out)
    assert tree["state.pth"] == b"P" * 1000 + FILES["state.pth"][1000:]
    assert tree["code/model_def.py"] == b"y = 2\n"
    assert tree["empty.bin"] == b"" and tree["code/deep/er/notes.txt"] == b"nested"


@pytest.mark.parametrize("mode", MODES)
def test_a_file_whose_size_differs_from_the_registry_is_an_error_naming_it(
    cli, register, tmp_path, capsys, mode
):
    resources = {name: len(data) for name, data in FILES.items()}
    resources["code/deep/er/notes.txt"] = 3  # storage holds 6 bytes
    storage_id = register(FILES, resources)
    argv = ["checkpoint", "download", storage_id, "-o", str(tmp_path / "out"), "--mode", mode]
    assert cli(argv) == 1
    err = capsys.readouterr().err
    assert "code/deep/er/notes.txt" in err and "3" in err


@pytest.mark.parametrize("mode", [*MODES, "auto"])
def test_a_file_missing_from_storage_is_an_error_naming_it(
    cli, register, tmp_path, capsys, served, mode
):
    storage_id = register(FILES)
    os.remove(register.manager.base_path / storage_id / "code" / "model_def.py")
    argv = ["checkpoint", "download", storage_id, "-o", str(tmp_path / "out"), "--mode", mode]
    assert cli(argv) == 1
    assert "code/model_def.py" in capsys.readouterr().err
    # auto copies what storage has and asks the registry for the rest (which answers 404).
    assert ("code/model_def.py" in served) == (mode != "direct")


def test_unknown_checkpoint_is_an_error(cli, tmp_path, capsys):
    assert cli(["checkpoint", "download", str(uuid.uuid4()), "-o", str(tmp_path / "o")]) == 1
    assert "404" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["tar", "tgz", "zip"])
def test_format_saves_the_archive(cli, register, tmp_path, capsys, kind):
    storage_id = register(FILES)
    target = tmp_path / f"ckpt.{kind}"
    assert cli(["checkpoint", "download", storage_id, "--format", kind, "-o", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target.resolve())
    assert not (tmp_path / f"ckpt.{kind}.part").exists()
    if kind == "zip":
        with zipfile.ZipFile(target) as archive:
            assert {name: archive.read(name) for name in archive.namelist()} == FILES
    else:
        with tarfile.open(target) as archive:
            got = {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
        assert got == FILES


@pytest.mark.parametrize("mode", MODES)
def test_progress_bar_on_request(cli, register, tmp_path, capsys, mode):
    storage_id = register(FILES)
    argv = ["checkpoint", "download", storage_id, "-o", str(tmp_path / "o"), "--mode", mode]
    assert cli([*argv, "--progress"]) == 0
    err = capsys.readouterr().err
    assert storage_id[:8] in err and "100%" in err


def test_no_archive_is_left_when_the_checkpoint_is_gone(cli, register, tmp_path, capsys):
    storage_id = register(FILES)
    register.manager.delete(storage_id)
    target = tmp_path / "gone.zip"
    assert cli(["checkpoint", "download", storage_id, "--format", "zip", "-o", str(target)]) == 1
    assert "410" in capsys.readouterr().err
    assert not target.exists() and not (tmp_path / "gone.zip.part").exists()


def test_it_refuses_a_registered_path_leaving_the_directory(cli, register, tmp_path, capsys):
    from registry.models import Checkpoint

    storage_id = register({"a.bin": b"a"})
    # The registry refuses such a path now; a row stored before it did (or a tampered
    # database) must still not make the CLI write outside DIR.
    Checkpoint.objects.filter(uuid=storage_id).update(resources={"a.bin": 1, "../escaped.txt": 1})
    assert cli(["checkpoint", "download", storage_id, "-o", str(tmp_path / "out")]) == 1
    assert "unsafe" in capsys.readouterr().err
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out").exists()
