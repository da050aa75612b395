"""Where a trial's TensorBoard files live and how they travel with its checkpoints.

Determined writes TensorBoard files into a local folder (``get_tensorboard_path()``) and syncs
them to ``<storage>/tensorboard/experiment/<id>/trial/<id>/``. Headway's storage addresses
checkpoints only, so the folder is copied into every checkpoint as ``tensorboard/`` instead
(docs/decisions/sdk.md, "TensorBoard files travel inside checkpoints"): the latest checkpoint of a
trial holds all of its event files and profiler traces, a resumed run copies them back, and
``headway tensorboard EXPERIMENT_ID`` downloads them from there.

The folder, the automatic metric writer and the copy into checkpoints belong to the Core API
(``headway.core._tensorboard.TensorboardFiles``, held by ``core_context.train``); this module
adds what the ``PyTorchTrialContext`` needs on top: Determined's
``get/set_enable_tensorboard_logging`` switch, the user's ``SummaryWriter`` and the restore on
resume.
"""

from __future__ import annotations

import logging
import pathlib
import shutil
from typing import Any

from headway.core._tensorboard import (
    TENSORBOARD_DIR,
    TensorboardFiles,
    default_tensorboard_path,
    make_summary_writer,
)

logger = logging.getLogger("headway.pytorch")

__all__ = [
    "TENSORBOARD_DIR",
    "default_tensorboard_path",
    "files_of",
    "make_summary_writer",
    "restore_from_checkpoint",
    "set_enabled",
    "user_writer",
]


def files_of(core_context: Any) -> TensorboardFiles:
    """The Core API context's TensorBoard folder (``core_context.train``'s)."""
    files: TensorboardFiles = core_context.train._tensorboard
    return files


def set_enabled(core_context: Any, enabled: Any) -> None:
    """``set_enable_tensorboard_logging``: switch writing metrics to TensorBoard and storing the
    folder with checkpoints (Determined's ``enable_tensorboard_logging``; default True).

    With it off, reported metrics are not written and no TensorBoard file is stored, including
    those written with ``get_tensorboard_writer()`` (as Determined uploads nothing then).

    Raises:
        TypeError: when ``enabled`` is not a bool (Determined raises too).
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enable_tensorboard_logging must be a bool, got {type(enabled).__name__}")
    files_of(core_context).enabled = enabled


def user_writer(core_context: Any) -> Any:
    """A new ``SummaryWriter`` in the folder, flushed before each checkpoint copies it."""
    files = files_of(core_context)
    writer = make_summary_writer(files.path)
    files.add_flusher(writer.flush)
    return writer


def restore_from_checkpoint(checkpoint: pathlib.Path, target: pathlib.Path) -> int:
    """Copy ``checkpoint/tensorboard/`` into ``target`` so a resumed run keeps its history.

    Files already in ``target`` are kept (event file names hold a timestamp and a pid, so old
    and new runs never collide). Returns the number of files copied.
    """
    source = checkpoint / TENSORBOARD_DIR
    if not source.is_dir():
        return 0
    copied = 0
    for file in source.rglob("*"):
        if not file.is_file() or file.is_symlink():
            continue
        dest = target / file.relative_to(source)
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, dest)
        copied += 1
    return copied
