"""``SharedFSStorageManager``: checkpoints in a directory every host mounts at the same path."""

from __future__ import annotations

import contextlib
import logging
import pathlib
import shutil
from collections.abc import Iterator
from typing import BinaryIO

from headway.storage._base import (
    StorageManager,
    check_relpath,
    check_storage_id,
    list_local_files,
)

logger = logging.getLogger("headway.storage")


class SharedFSStorageManager(StorageManager):
    """Checkpoints stored as ``<base_path>/<storage_id>/`` on a shared file system.

    ``store_path`` yields the final directory itself, so a checkpoint is written once and never
    copied (ARCHITECTURE.md, "don't copy a checkpoint twice"). Mirrors Determined's
    ``SharedFSStorageManager`` (``host_path`` + optional ``storage_path``).

    Arguments:
        base_path (str | os.PathLike): directory holding one sub-directory per checkpoint; created
            on first write.
    """

    def __init__(self, base_path: str | pathlib.Path) -> None:
        self.base_path = pathlib.Path(base_path).expanduser().absolute()

    def __repr__(self) -> str:
        return f"SharedFSStorageManager({str(self.base_path)!r})"

    def _dir(self, storage_id: str) -> pathlib.Path:
        return self.base_path / check_storage_id(storage_id)

    def _existing_dir(self, storage_id: str) -> pathlib.Path:
        path = self._dir(storage_id)
        if not path.is_dir():
            raise FileNotFoundError(f"checkpoint {storage_id} not found in {self.base_path}")
        return path

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield ``<base_path>/<storage_id>`` (created); delete it if the block raises."""
        path = self._dir(storage_id)
        path.mkdir(parents=True, exist_ok=True)
        try:
            yield path
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield the checkpoint directory itself (no copy)."""
        yield self._existing_dir(storage_id)

    def list_files(self, storage_id: str) -> dict[str, int]:
        """Return ``{relative path: size}`` of every regular file (symlinks skipped)."""
        return list_local_files(self._existing_dir(storage_id))

    def open_file(self, storage_id: str, relpath: str) -> BinaryIO:
        """Open ``<checkpoint>/<relpath>`` for reading; refuse paths leaving the checkpoint."""
        rel = check_relpath(relpath)
        root = self._existing_dir(storage_id).resolve()
        path = (root / rel).resolve()
        # resolve() follows symlinks: a link inside the checkpoint must not expose other files.
        if not path.is_relative_to(root):
            raise ValueError(f"checkpoint file path {relpath!r} points outside the checkpoint")
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {storage_id} has no file {relpath!r}")
        return open(path, "rb")  # noqa: SIM115 - the caller streams and closes it

    def delete(self, storage_id: str) -> None:
        """Remove the checkpoint directory (no error when it is already gone)."""
        shutil.rmtree(self._dir(storage_id), ignore_errors=True)

    def exists(self, storage_id: str) -> bool:
        """Return True when ``<base_path>/<storage_id>`` is a directory."""
        return self._dir(storage_id).is_dir()
