"""The CLI's packer and the registry's check apply one set of model-definition rules.

Every directory below is packed with the CLI's packer and the result posted to the real
``POST /api/v1/experiments/``. Either both accept, or the CLI refuses before sending anything, with
the message the registry gives for the same directory uploaded another way: as a plain ``tar``
would pack it (links kept as links), or, for size limits, as the packer would with a larger limit.
Hand-made archives that no directory can produce (``../x``, absolute paths, hard links, devices)
go to the registry only, and must be refused with ``headway.archive``'s messages.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from headway.archive import (
    MAX_MEMBERS,
    MAX_MODEL_DEF_BYTES,
    UNPACKED_FACTOR,
    ModelDefinitionError,
    ModelDefinitionTooLarge,
    UnsafeArchivePath,
    check_member_path,
    check_model_definition,
    extract_model_definition,
    pack_model_definition,
)
from headway.cli.main import main
from registry.models import Experiment
from tests.helpers import TINY_CONFIG, create_experiment

pytestmark = pytest.mark.django_db

MODEL_DEF = "class TinyTrial:\n    pass\n"


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    root = tmp_path / "model"
    (root / "pkg").mkdir(parents=True)
    (root / "model_def.py").write_text(MODEL_DEF)
    (root / "pkg" / "__init__.py").write_text("")
    return root


def plain_tar(root: Path) -> bytes:
    """What ``tar czf`` of the directory's contents uploads: links stay links (hard links too)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:

        def add(directory: Path, prefix: str) -> None:
            for entry in sorted(os.scandir(directory), key=lambda e: e.name):
                tar.add(entry.path, prefix + entry.name, recursive=False)
                if entry.is_dir(follow_symlinks=False):
                    add(Path(entry.path), prefix + entry.name + "/")

        add(root, "")
    return buffer.getvalue()


def server_error(response) -> str:
    """The registry's one message for a refused model definition."""
    assert response.status_code in (400, 413), response.json()
    return response.json()["errors"]["model_definition"][0]


def cli_then_server(api, settings, directory: Path, max_bytes: int = MAX_MODEL_DEF_BYTES):
    """Pack ``directory`` and post it. Returns the accepted archive, or the common refusal.

    When the packer refuses, the registry gets the same directory as a plain tar (or, for a size
    limit, as packed under a limit large enough) and must refuse it with the same words.
    """
    settings.HEADWAY_MAX_MODEL_DEF_BYTES = max_bytes
    stored = Experiment.objects.count()
    try:
        archive = pack_model_definition(directory, max_bytes)
    except ModelDefinitionTooLarge as exc:
        unlimited = pack_model_definition(directory, 1 << 40)
        response = create_experiment(api, model=unlimited)
        assert response.status_code == 413
        assert server_error(response) == str(exc)
        assert Experiment.objects.count() == stored  # nothing stored
        return exc
    except ModelDefinitionError as exc:
        response = create_experiment(api, model=plain_tar(directory))
        assert response.status_code == 400
        assert server_error(response) == str(exc)
        assert Experiment.objects.count() == stored  # nothing stored
        return exc
    response = create_experiment(api, model=archive)
    assert response.status_code == 201, response.json()
    return archive


def members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


# --- directories through the CLI packer, then the registry --------------------------------


def test_a_plain_directory_is_accepted_as_packed(api, settings, model_dir: Path) -> None:
    (model_dir / "__pycache__").mkdir()
    (model_dir / "__pycache__" / "model_def.cpython-311.pyc").write_bytes(b"\0")
    (model_dir / ".git").mkdir()
    (model_dir / "stale.pyc").write_bytes(b"\0")
    archive = cli_then_server(api, settings, model_dir)
    assert set(members(archive)) == {"model_def.py", "pkg", "pkg/__init__.py"}
    stored = Experiment.objects.get()
    assert bytes(stored.model_definition) == archive


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("alias.py", "model_def.py"),
        ("pkg/alias.py", "../model_def.py"),
        ("pkg/alias.py", "ABSOLUTE/model_def.py"),
        ("chain.py", "alias.py"),
    ],
    ids=["sibling", "from-subfolder", "absolute-but-inside", "link-to-a-link"],
)
def test_links_to_files_inside_are_stored_as_copies(
    api, settings, model_dir: Path, tmp_path: Path, link: str, target: str
) -> None:
    (model_dir / "alias.py").symlink_to("model_def.py")
    (model_dir / link).unlink(missing_ok=True)
    (model_dir / link).symlink_to(target.replace("ABSOLUTE", str(model_dir)))
    archive = cli_then_server(api, settings, model_dir)
    member = members(archive)[link]
    assert member.isfile() and member.size == len(MODEL_DEF)
    # What the worker unpacks is a real file with the target's bytes.
    out = tmp_path / "unpacked"
    extract_model_definition(archive, out)
    assert not (out / link).is_symlink() and (out / link).read_text() == MODEL_DEF


@pytest.mark.parametrize(
    ("link", "target", "words"),
    [
        ("leak.txt", "../secret.txt", "points outside the model directory"),
        ("pkg/leak.txt", "SECRET", "points outside the model directory"),
        ("a.py", "b.py", "points outside the model directory"),  # b.py -> ../secret.txt
        ("gone.py", "missing.py", "is broken"),
        ("loop.py", "loop.py", "is broken"),
        ("lib", "pkg", "points to a folder"),
        ("pkg/up", "..", "points to a folder"),
    ],
    ids=["outside", "absolute-outside", "chain-outside", "broken", "loop", "folder", "ancestor"],
)
def test_links_the_packer_refuses_are_refused_by_the_registry_in_the_same_words(
    api, settings, model_dir: Path, tmp_path: Path, link: str, target: str, words: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    if link == "a.py":
        (model_dir / "b.py").symlink_to("../secret.txt")
    (model_dir / link).symlink_to(target.replace("SECRET", str(secret)))
    refusal = cli_then_server(api, settings, model_dir)
    assert isinstance(refusal, ModelDefinitionError)
    assert f"symbolic link {link!r}" in str(refusal) and words in str(refusal)


def test_hard_linked_files_are_packed_as_two_files(api, settings, model_dir: Path) -> None:
    os.link(model_dir / "model_def.py", model_dir / "pkg" / "same.py")
    archive = cli_then_server(api, settings, model_dir)
    assert members(archive)["pkg/same.py"].isfile()
    assert members(archive)["pkg/same.py"].size == len(MODEL_DEF)
    # tar would have sent a hard link, which the registry refuses.
    response = create_experiment(api, model=plain_tar(model_dir))
    assert "is a hard link to 'model_def.py'" in server_error(response)


def test_fifos_are_left_out(api, settings, model_dir: Path) -> None:
    os.mkfifo(model_dir / "pipe")
    archive = cli_then_server(api, settings, model_dir)
    assert "pipe" not in members(archive)
    response = create_experiment(api, model=plain_tar(model_dir))
    assert server_error(response) == "archive member 'pipe' is not a regular file or folder"


def test_empty_folders_are_kept(api, settings, model_dir: Path, tmp_path: Path) -> None:
    (model_dir / "data" / "empty").mkdir(parents=True)
    archive = cli_then_server(api, settings, model_dir)
    assert members(archive)["data/empty"].isdir()
    extract_model_definition(archive, tmp_path / "out")
    assert (tmp_path / "out" / "data" / "empty").is_dir()


def test_the_packed_limit_is_the_same_on_both_sides(api, settings, model_dir: Path) -> None:
    (model_dir / "weights.bin").write_bytes(os.urandom(50_000))  # does not compress
    size = len(pack_model_definition(model_dir, 1 << 40))
    assert cli_then_server(api, settings, model_dir, max_bytes=size) is not None
    Experiment.objects.all().delete()
    refusal = cli_then_server(api, settings, model_dir, max_bytes=size - 1)
    assert isinstance(refusal, ModelDefinitionTooLarge)
    assert f"({size - 1} bytes packed" in str(refusal)


def test_the_unpacked_limit_is_the_same_on_both_sides(api, settings, model_dir: Path) -> None:
    limit = 64 * 1024
    room = UNPACKED_FACTOR * limit - len(MODEL_DEF)
    with open(model_dir / "zeros.bin", "wb") as fh:
        fh.truncate(room)  # sparse: no disk used, compresses to almost nothing
    archive = cli_then_server(api, settings, model_dir, max_bytes=limit)
    assert isinstance(archive, bytes) and len(archive) < limit
    Experiment.objects.all().delete()
    with open(model_dir / "zeros.bin", "r+b") as fh:
        fh.truncate(room + 1)
    refusal = cli_then_server(api, settings, model_dir, max_bytes=limit)
    assert str(refusal) == (
        "model definition is over the size limit (65536 bytes packed, 262144 bytes unpacked);"
        " keep data sets and checkpoints out of the model directory"
    )


def test_a_huge_file_is_refused_before_it_is_read(model_dir: Path) -> None:
    with open(model_dir / "huge.bin", "wb") as fh:
        fh.truncate(1 << 36)  # 64 GiB, sparse: compressing it would take minutes
    with pytest.raises(ModelDefinitionTooLarge, match=r"\(32 MiB packed, 128 MiB unpacked\)"):
        pack_model_definition(model_dir)


def test_a_name_with_a_backslash_is_refused_by_both(api, settings, model_dir: Path) -> None:
    (model_dir / "odd\\name.py").write_text("x = 1\n")
    refusal = cli_then_server(api, settings, model_dir)
    assert str(refusal) == "archive member 'odd\\\\name.py' contains a backslash"


def test_the_missing_entrypoint_class_is_refused_by_both(api, settings, model_dir: Path) -> None:
    (model_dir / "model_def.py").write_text("class Other: pass\n")
    archive = pack_model_definition(model_dir)
    with pytest.raises(ModelDefinitionError) as refusal:
        check_model_definition(archive, entrypoint_class=("model_def", "TinyTrial"))
    response = create_experiment(api, model=archive)
    assert response.status_code == 400
    assert response.json()["errors"]["config.entrypoint"] == [str(refusal.value)]


# --- the CLI command itself against a live registry -----------------------------------------


@pytest.fixture
def live_master(live_server, django_user_model, monkeypatch, tmp_path) -> str:
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_user("dana", password="pw-dana")
    monkeypatch.setenv("HEADWAY_TOKEN", Token.objects.create(user=user).key)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    return live_server.url


@pytest.mark.django_db(transaction=True)
def test_experiment_create_uploads_copies_of_linked_files(
    live_master: str, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (model_dir / "alias.py").symlink_to("model_def.py")
    config = tmp_path / "exp.yaml"
    config.write_text(TINY_CONFIG)
    assert main(["--master", live_master, "experiment", "create", str(config), str(model_dir)]) == 0
    assert capsys.readouterr().out.startswith("Created experiment")
    stored = bytes(Experiment.objects.get().model_definition)
    assert members(stored)["alias.py"].isfile()


@pytest.mark.django_db(transaction=True)
def test_experiment_create_refuses_an_outside_link_before_sending(
    live_master: str, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (model_dir / "leak.txt").symlink_to("/etc/hostname")
    config = tmp_path / "exp.yaml"
    config.write_text(TINY_CONFIG)
    assert main(["--master", live_master, "experiment", "create", str(config), str(model_dir)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "error: symbolic link 'leak.txt' -> '/etc/hostname' points outside the model directory;"
        " copy what it points to into the directory instead"
    )
    assert Experiment.objects.count() == 0


# --- hand-made archives: the registry only ----------------------------------------------------


def hand_made(*extra: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("model_def.py")
        info.size = len(MODEL_DEF)
        tar.addfile(info, io.BytesIO(MODEL_DEF.encode()))
        for member in extra:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.size else None)
    return buffer.getvalue()


def member(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    return info


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([member("../x", size=1)], "archive member '../x' contains '..'"),
        ([member("a/../../x", size=1)], "archive member 'a/../../x' contains '..'"),
        ([member("/etc/evil.py", size=1)], "archive member '/etc/evil.py' has an absolute path"),
        ([member("a\\..\\x", size=1)], "archive member 'a\\\\..\\\\x' contains a backslash"),
        (
            [member("copy.py", tarfile.LNKTYPE, link="model_def.py")],
            "archive member 'copy.py' is a hard link to 'model_def.py'; uploads hold only"
            " regular files and folders",
        ),
        ([member("tty", tarfile.CHRTYPE)], "archive member 'tty' is not a regular file or folder"),
        ([member("sda", tarfile.BLKTYPE)], "archive member 'sda' is not a regular file or folder"),
        (
            [member("pipe", tarfile.FIFOTYPE)],
            "archive member 'pipe' is not a regular file or folder",
        ),
        (
            [member("inner.py", tarfile.SYMTYPE, link="model_def.py")],
            "archive member 'inner.py' is a symbolic link; uploads hold only regular files and"
            " folders (`headway experiment create` stores a copy of the file that a link inside"
            " the model directory points to)",
        ),
        (
            [member("etc", tarfile.SYMTYPE, link="/etc"), member("etc/passwd", size=1)],
            "symbolic link 'etc' -> '/etc' points outside the model directory; copy what it"
            " points to into the directory instead",
        ),
    ],
    ids=[
        "dotdot",
        "nested-dotdot",
        "absolute",
        "backslash",
        "hard-link",
        "char-device",
        "block-device",
        "fifo",
        "symlink-inside",
        "symlink-then-member-through-it",
    ],
)
def test_hand_made_archives_are_refused_with_the_shared_messages(api, extra, message) -> None:
    archive = hand_made(*extra)
    with pytest.raises(ModelDefinitionError) as refusal:
        check_model_definition(archive)
    assert str(refusal.value) == message
    assert server_error(create_experiment(api, model=archive)) == message


def test_more_than_max_members_is_refused(api) -> None:
    # Shared with the packer (one counter, headway.archive._Budget); 10,001 files on disk
    # would make this test slow, so the archive is made in memory.
    extra = [member(f"many/{i}.txt") for i in range(MAX_MEMBERS)]  # + model_def.py
    message = server_error(create_experiment(api, model=hand_made(*extra)))
    assert message == f"model definition has more than {MAX_MEMBERS} files and folders"


def test_a_link_before_its_target_is_not_called_broken(api) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.addfile(member("alias.py", tarfile.SYMTYPE, link="model_def.py"))
        info = member("model_def.py", size=len(MODEL_DEF))
        tar.addfile(info, io.BytesIO(MODEL_DEF.encode()))
    assert "is a symbolic link; uploads hold only" in server_error(
        create_experiment(api, model=buffer.getvalue())
    )


def test_an_archive_of_dot_is_accepted(api) -> None:
    """``tar czf model.tgz -C model_dir .`` names members ``./model_def.py``; that is safe."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.addfile(member(".", tarfile.DIRTYPE))
        tar.addfile(member("./model_def.py", size=len(MODEL_DEF)), io.BytesIO(MODEL_DEF.encode()))
    assert create_experiment(api, model=buffer.getvalue()).status_code == 201


def test_garbage_is_refused(api) -> None:
    message = server_error(create_experiment(api, model=b"definitely not a tarball"))
    assert message.startswith("model definition is not a valid tar.gz archive")


# --- the path rule shared with checkpoint storage -------------------------------------------


@pytest.mark.parametrize(
    ("name", "normalised"), [("a/b", "a/b"), ("./a//b/", "a/b"), (".", "."), ("a/.../b", "a/.../b")]
)
def test_check_member_path_normalises_safe_paths(name: str, normalised: str) -> None:
    assert str(check_member_path(name)) == normalised


@pytest.mark.parametrize("name", ["", "../x", "a/..", "/x", "a\\b", "a\x00b"])
def test_check_member_path_refuses_unsafe_paths(name: str) -> None:
    with pytest.raises(UnsafeArchivePath, match="checkpoint file path"):
        check_member_path(name, what="checkpoint file path")
