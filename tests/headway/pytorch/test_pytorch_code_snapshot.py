"""The model code snapshot a ``fit()`` takes for ``code/`` (held in memory when small instead
of a temporary copy): the same files, content, mode and modification time either way,
taken once, so later edits and new files stay out."""

from __future__ import annotations

import os
import pathlib

from headway.pytorch._code_snapshot import snapshot_model_code


def _tree(root: pathlib.Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode, int(p.stat().st_mtime))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _model_folder(root: pathlib.Path) -> pathlib.Path:
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "pkg" / "model.py").write_bytes(b"W = 1\n" * 100)
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    os.utime(root / "train.py", (1_700_000_000, 1_700_000_000))
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"x")
    (root / "checkpoints").mkdir()
    (root / "checkpoints" / "big.bin").write_bytes(b"0" * 10)
    return root


def test_in_memory_and_folder_snapshots_write_the_same_code(tmp_path: pathlib.Path) -> None:
    root = _model_folder(tmp_path / "model")
    exclude = [root / "checkpoints"]
    in_memory = snapshot_model_code(root, exclude)
    in_folder = snapshot_model_code(root, exclude, in_memory_bytes=0)
    assert in_memory is not None and in_memory.folder is None
    assert in_folder is not None and in_folder.folder is not None
    # Taken once: what changes afterwards is not in the checkpoints' code/.
    (root / "train.py").write_text("print('edited')\n")
    (root / "later.py").write_text("x = 1\n")
    for name, snapshot in (("memory", in_memory), ("folder", in_folder)):
        snapshot.write_into(tmp_path / name / "code")
        snapshot.write_into(tmp_path / name / "code2")  # each checkpoint gets the same files
    memory, folder = _tree(tmp_path / "memory" / "code"), _tree(tmp_path / "folder" / "code")
    assert memory == folder == _tree(tmp_path / "memory" / "code2")
    assert sorted(memory) == ["pkg/model.py", "run.sh", "train.py"]
    assert memory["train.py"] == (b"print('train')\n", memory["train.py"][1], 1_700_000_000)
    assert memory["run.sh"][1] & 0o777 == 0o755
    snapshot_folder = in_folder.folder
    in_folder.remove()
    in_memory.remove()
    assert not snapshot_folder.exists() and in_memory.files == []


def test_code_over_the_limit_is_not_taken(tmp_path: pathlib.Path) -> None:
    root = _model_folder(tmp_path / "model")
    assert snapshot_model_code(root, [], max_bytes=100) is None
