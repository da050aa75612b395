"""Lightning checkpoint files as Headway checkpoints, and the way back for a resumed trial.

One Lightning file (``*.ckpt``) is one Headway checkpoint: a directory holding that file and
``metadata.json`` with ``steps_completed`` (Lightning's global step when it was saved) and a
``lightning`` entry (the file's name, the ``ModelCheckpoint``'s monitored metric and score, the
module's hparams). ``latest_checkpoint_path`` turns the trial's latest checkpoint back into a
path for ``Trainer.fit(ckpt_path=...)``.
"""

from __future__ import annotations

import json
import logging
import pathlib
import shutil
import tempfile
from typing import Any

from headway.core import Context, DownloadMode

METADATA_KEY = "lightning"

logger = logging.getLogger("headway.lightning")


def store_file(
    core_context: Context, file: str | pathlib.Path, steps_completed: int, info: dict[str, Any]
) -> str:
    """Copy the Lightning checkpoint ``file`` into a new Headway checkpoint of this trial and
    return its ``storage_id`` (chief only, as ``CheckpointContext.store_path``).

    Arguments:
        file: the ``.ckpt`` file Lightning wrote, or the folder a sharded strategy (FSDP,
            DeepSpeed) wrote, copied as rank zero sees it.
        steps_completed: Lightning's global step at the save (optimizer steps, >= 0).
        info: JSON-serializable, stored under ``metadata["lightning"]`` with ``file`` added.

    Raises:
        FileNotFoundError: when ``file`` does not exist.
        ValueError, TypeError, RuntimeError: as ``CheckpointContext.store_path``.
    """
    source = pathlib.Path(file)
    if not source.exists():
        raise FileNotFoundError(f"Lightning checkpoint {str(source)!r} does not exist")
    metadata = {
        "steps_completed": steps_completed,
        METADATA_KEY: {**info, "file": source.name},
    }
    with core_context.checkpoint.store_path(metadata) as (path, storage_id):
        if source.is_dir():
            shutil.copytree(source, path / source.name)
        else:
            shutil.copy2(source, path / source.name)
    return storage_id


def latest_checkpoint_path(
    core_context: Context, directory: str | pathlib.Path | None = None
) -> str | None:
    """The local path of the Lightning file in the trial's latest Headway checkpoint, or None
    when there is none (a new trial, or local mode).

    Pass it to ``Trainer.fit(ckpt_path=...)``: Lightning restores the weights, optimizers, loops
    and global step, so a resumed (paused, restarted) trial continues at the checkpoint's
    ``steps_completed``. Every rank calls it and gets its own copy, and logs which checkpoint
    it restores (``restoring checkpoint <storage_id> at step <steps_completed>``).

    Arguments:
        core_context: the trial's Core API context (``core.init()``).
        directory: where to copy the checkpoint's files; default a new temporary directory
            (left for the operating system to clean up).

    Raises:
        FileNotFoundError: when the checkpoint is not in storage, or it holds no Lightning file
            (one not registered by ``HeadwayLogger`` / ``HeadwayCallback``).
    """
    info = core_context.info
    storage_id = info.latest_checkpoint if info is not None else None
    if storage_id is None:
        return None
    target = pathlib.Path(directory or tempfile.mkdtemp(prefix="headway-lightning-"))
    target.mkdir(parents=True, exist_ok=True)
    core_context.checkpoint.download(storage_id, target, DownloadMode.NoSharedDownload)
    metadata = _metadata(target)
    name = _lightning_file(metadata)
    if name is None or not (target / name).exists():
        raise FileNotFoundError(
            f"checkpoint {storage_id} holds no Lightning checkpoint file (metadata.json has no "
            f"'{METADATA_KEY}.file'): it was not stored by headway.lightning"
        )
    # On every rank: a resumed trial's logs say which checkpoint each rank restored.
    logger.info(
        "restoring checkpoint %s at step %s: %s",
        storage_id,
        metadata.get("steps_completed"),
        target / name,
    )
    return str(target / name)


def _metadata(directory: pathlib.Path) -> dict[str, Any]:
    try:
        metadata = json.loads((directory / "metadata.json").read_text())
    except (OSError, ValueError):
        return {}
    return metadata if isinstance(metadata, dict) else {}


def _lightning_file(metadata: dict[str, Any]) -> str | None:
    entry = metadata.get(METADATA_KEY)
    name = entry.get("file") if isinstance(entry, dict) else None
    # A bare file name only: never a path that leaves the checkpoint's directory.
    return name if isinstance(name, str) and name and pathlib.Path(name).name == name else None
