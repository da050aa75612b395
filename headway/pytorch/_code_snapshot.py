"""The trial's model code as it was when ``fit()`` started, for the ``code/`` of checkpoints.

Determined saves the model definition into each checkpoint (``util.write_user_code``); a local
``fit()`` takes a snapshot of the folder the trial class imports from, once, so that files the
trial writes later do not end up in ``code/``. Small code (the usual few scripts) is kept in
memory: creating one file costs about a millisecond on some disks, and a temporary copy of a
model folder of 20 files made every ``fit()`` start 20 ms later (docs/performance.md);
larger code is copied into a temporary folder as before.
"""

from __future__ import annotations

import inspect
import logging
import os
import pathlib
import shutil
import sys
import tempfile

from headway.archive import (
    MAX_MEMBERS,
    MAX_MODEL_DEF_BYTES,
    SKIP_NAMES,
    SKIP_SUFFIXES,
    UNPACKED_FACTOR,
)

logger = logging.getLogger("headway.pytorch")

MAX_CODE_BYTES = MAX_MODEL_DEF_BYTES * UNPACKED_FACTOR
"""Largest model code copied into ``code/`` (what a model definition may unpack to)."""
IN_MEMORY_CODE_BYTES = 4 * 1024 * 1024
"""Code up to this size is held in memory; larger code in a temporary folder."""


def model_code_root(trial_cls: type) -> pathlib.Path | None:
    """The folder from which ``trial_cls``'s module imports (the module file's folder, one level
    up per dot in a dotted module name); None for classes without a source file."""
    module = trial_cls.__module__
    try:
        file = pathlib.Path(
            inspect.getfile(sys.modules[module] if module == "__main__" else trial_cls)
        )
    except (TypeError, KeyError):
        return None
    root = file.resolve().parent
    if module != "__main__":
        for _ in range(module.count(".")):
            root = root.parent
    return root


class CodeSnapshot:
    """Files taken by ``snapshot_model_code``: in memory, or in a temporary folder.

    Arguments:
        files (list[tuple[str, bytes, int, float]]): relative path, content, mode, mtime (the
            in-memory form; empty when ``folder`` is given).
        folder (pathlib.Path | None): a temporary folder holding the copy (large code).
    """

    def __init__(
        self,
        files: list[tuple[str, bytes, int, float]],
        folder: pathlib.Path | None = None,
    ) -> None:
        self.files = files
        self.folder = folder

    def write_into(self, dest: pathlib.Path) -> None:
        """Write the files under ``dest`` (created), keeping their mode and modification time
        as ``shutil.copy2`` does."""
        if self.folder is not None:
            shutil.copytree(self.folder, dest, dirs_exist_ok=True)
            return
        for relative, content, mode, mtime in self.files:
            path = dest / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            os.chmod(path, mode)
            os.utime(path, (mtime, mtime))

    def remove(self) -> None:
        """Free the snapshot (delete the temporary folder)."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        self.files = []


def snapshot_model_code(
    root: pathlib.Path,
    exclude: list[pathlib.Path],
    max_bytes: int = MAX_CODE_BYTES,
    in_memory_bytes: int = IN_MEMORY_CODE_BYTES,
) -> CodeSnapshot | None:
    """Take the model code under ``root`` (files read into memory up to ``in_memory_bytes`` in
    all, else copied into a new temporary folder).

    Taken once when ``fit()`` starts, so files the trial writes into its working directory later
    do not end up in ``code/``. Leaves out what a model definition leaves out (``.git``,
    ``__pycache__``, ``*.pyc``), symbolic links, and the folders in ``exclude`` (checkpoint and
    TensorBoard folders that may sit inside ``root``). Returns None, with a warning, when the
    code is over ``max_bytes`` or ``MAX_MEMBERS`` files (checkpoints are then saved without
    ``code/``).
    """
    skip = {os.path.realpath(p) for p in exclude}
    files: list[pathlib.Path] = []
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_NAMES
            and not os.path.islink(os.path.join(folder, d))
            and os.path.realpath(os.path.join(folder, d)) not in skip
        )
        for name in sorted(names):
            path = pathlib.Path(folder, name)
            if name.endswith(SKIP_SUFFIXES) or path.is_symlink() or not path.is_file():
                continue
            total += path.stat().st_size
            files.append(path)
            if total > max_bytes or len(files) > MAX_MEMBERS:
                logger.warning(
                    "model code under %s is over %d bytes or %d files: checkpoints will have "
                    "no code/ folder (move data out of the model directory)",
                    root,
                    max_bytes,
                    MAX_MEMBERS,
                )
                return None
    if total <= in_memory_bytes:
        taken = []
        for file in files:
            stat = file.stat()
            taken.append(
                (str(file.relative_to(root)), file.read_bytes(), stat.st_mode, stat.st_mtime)
            )
        return CodeSnapshot(taken)
    target = pathlib.Path(tempfile.mkdtemp(prefix="headway-code-"))
    for file in files:
        dest = target / file.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, dest)
    return CodeSnapshot([], target)
