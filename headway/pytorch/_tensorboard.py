"""Where a trial's TensorBoard files live and how they travel with its checkpoints.

Determined writes TensorBoard files into a local folder (``get_tensorboard_path()``) and syncs
them to ``<storage>/tensorboard/experiment/<id>/trial/<id>/``. Headway's storage addresses
checkpoints only, so the folder is copied into every checkpoint as ``tensorboard/`` instead
(docs/decisions.md, "TensorBoard files travel inside checkpoints"): the latest checkpoint of a
trial holds all of its event files and profiler traces, a resumed run copies them back, and
``headway tensorboard EXPERIMENT_ID`` downloads them from there.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import tempfile
from typing import Any

logger = logging.getLogger("headway.pytorch")

TENSORBOARD_DIR = "tensorboard"
"""Name of the folder holding TensorBoard files inside a checkpoint."""


def default_tensorboard_path(trial_id: int, rank: int) -> pathlib.Path:
    """A fresh folder for this process's TensorBoard files.

    On the cluster: ``tensorboard-rank<r>`` in the run's working folder (next to
    ``cluster_info.json``, outside the model code, removed with the run folder). Locally: a new
    temporary folder, as Determined uses ``/tmp/tensorboard-...``.
    """
    info_file = os.environ.get("HEADWAY_CLUSTER_INFO")
    if info_file:
        path = pathlib.Path(info_file).parent / f"tensorboard-rank{rank}"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return pathlib.Path(tempfile.mkdtemp(prefix=f"headway-tensorboard-trial{trial_id}-rank{rank}-"))


def make_summary_writer(path: pathlib.Path) -> Any:
    """A ``torch.utils.tensorboard.SummaryWriter`` writing into ``path``.

    Raises:
        ImportError: naming the ``tensorboard`` package when it is not installed.
    """
    try:
        from torch.utils import tensorboard
    except ImportError as exc:  # torch imports the tensorboard package lazily here
        raise ImportError(
            "get_tensorboard_writer() needs the 'tensorboard' package (pip install tensorboard)"
        ) from exc
    return tensorboard.SummaryWriter(str(path))


def copy_into_checkpoint(source: pathlib.Path, checkpoint: pathlib.Path) -> None:
    """Copy every file under ``source`` into ``checkpoint/tensorboard/`` (nothing if empty)."""
    if not source.is_dir() or not any(source.iterdir()):
        return
    shutil.copytree(source, checkpoint / TENSORBOARD_DIR, dirs_exist_ok=True)


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
