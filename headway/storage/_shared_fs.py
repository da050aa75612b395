"""``SharedFSStorageManager``: checkpoints in a directory every host mounts at the same path."""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from headway.storage._base import (
    MARKER_FILE,
    MAX_MARKER_BYTES,
    Readable,
    StorageManager,
    check_relpath,
    check_storage_id,
    is_storage_id,
    list_local_files,
    marker_bytes,
    parse_marker,
)
from headway.storage._retry import retry_transient, transient_os_error

logger = logging.getLogger("headway.storage")

# fsync threads: concurrent fsyncs of many small files let the file system batch its journal
# commits (one at a time, a checkpoint of 1,000 files would wait for 1,000 commits).
_FSYNC_THREADS = 8


def _fsync(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_durable(root: pathlib.Path, *extra: pathlib.Path) -> None:
    """fsync every regular file and folder under ``root`` (symbolic links are neither followed
    nor synced), then ``root`` itself, each of ``extra`` and ``root``'s parent (which holds the
    entries of ``root`` and its marker): after it returns, a crash or power loss cannot lose what
    is under ``root``.

    This is what ``cp`` + ``sync FILE...`` does; without it, a checkpoint registered just before
    a crash could come back empty or truncated (the page cache had not reached the disk).

    Raises:
        OSError: from ``open``/``fsync`` (e.g. EIO, a file removed meanwhile).
    """
    files: list[str] = []
    folders: list[str] = []
    for folder, dirnames, filenames in os.walk(root):
        folders.append(folder)
        for name in filenames:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                files.append(path)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(folder, d))]
    if len(files) > 1:
        with ThreadPoolExecutor(min(_FSYNC_THREADS, len(files))) as pool:
            list(pool.map(_fsync, files))
    elif files:
        _fsync(files[0])
    # Folders after their files, deepest first: each fsync makes the entries in it durable.
    for folder in [*reversed(folders), *map(str, extra), str(root.parent)]:
        _fsync(folder)


class SharedFSStorageManager(StorageManager):
    """Checkpoints stored as ``<base_path>/<storage_id>/`` on a shared file system.

    ``store_path`` yields the final directory itself, so a checkpoint is written once and never
    copied. Mirrors Determined's
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

    def marker_path(self, storage_id: str) -> pathlib.Path:
        """Where the checkpoint's marker is: ``<base_path>/.<storage_id>.headway-checkpoint.json``,
        next to its folder rather than in it, so the folder holds only the checkpoint's own files
        (what ``store_path`` callers and ``restore_path`` see, as in Determined)."""
        return self.base_path / f".{check_storage_id(storage_id)}{MARKER_FILE}"

    def _existing_dir(self, storage_id: str) -> pathlib.Path:
        """The checkpoint's own directory, resolved; never a symbolic link (trial code can make
        one, e.g. to ``/``) nor anything that resolves outside ``<base_path>/<storage_id>``."""
        path = self._dir(storage_id)
        real = path.resolve()
        if path.is_symlink() or not path.is_dir() or real != self.base_path.resolve() / path.name:
            raise FileNotFoundError(f"checkpoint {storage_id} not found in {self.base_path}")
        return real

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield ``<base_path>/<storage_id>`` (created, its marker written first, so even a
        crashed write is provably Headway's); delete both if the block raises.

        On normal exit every file and folder written is fsynced (``make_durable``), so what the
        caller registers next is on disk, not only in this host's page cache.
        """
        path = self._dir(storage_id)
        marker = self.marker_path(storage_id)

        def prepare() -> None:
            path.mkdir(parents=True, exist_ok=True)
            marker.write_bytes(marker_bytes(storage_id))

        try:
            # Before and after the caller's block (which writes the files itself, once): the
            # steps a file-server hiccup can fail are retried (``HEADWAY_STORAGE_RETRY_SECONDS``).
            retry_transient(
                f"creating checkpoint {storage_id} in {self.base_path}", prepare, transient_os_error
            )
            yield path
            retry_transient(
                f"syncing checkpoint {storage_id} to {self.base_path}",
                lambda: make_durable(path, marker),
                transient_os_error,
            )
        except BaseException:
            self.delete(storage_id)
            raise

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield the checkpoint directory itself (no copy); finding it is retried through a
        transient file-server error (ESTALE, EIO ...)."""
        yield retry_transient(
            f"opening checkpoint {storage_id} in {self.base_path}",
            lambda: self._existing_dir(storage_id),
            transient_os_error,
        )

    def list_files(self, storage_id: str) -> dict[str, int]:
        """Return ``{relative path: size}`` of every regular file (symlinks skipped)."""
        return list_local_files(self._existing_dir(storage_id))

    def _file(self, storage_id: str, relpath: str) -> pathlib.Path:
        rel = check_relpath(relpath)
        root = self._existing_dir(storage_id)
        path = (root / rel).resolve()
        # resolve() follows symlinks: a link inside the checkpoint (a file or a folder) must not
        # expose other files, not even another checkpoint's.
        if path != root / rel or not path.is_relative_to(root):
            raise ValueError(f"checkpoint file path {relpath!r} points outside the checkpoint")
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {storage_id} has no file {relpath!r}")
        return path

    def open_file(
        self, storage_id: str, relpath: str, *, start: int = 0, end: int | None = None
    ) -> BinaryIO:
        """Open ``<checkpoint>/<relpath>`` for reading at ``start``; refuse paths leaving the
        checkpoint. The file is not cut at ``end``: the caller reads ``end - start`` bytes."""
        # O_NOFOLLOW: a file swapped for a link after the check is refused, not followed.
        fd = os.open(self._file(storage_id, relpath), os.O_RDONLY | os.O_NOFOLLOW)
        fh = os.fdopen(fd, "rb")
        if start:
            fh.seek(start)
        return fh

    def file_size(self, storage_id: str, relpath: str) -> int:
        """Size in bytes of ``<checkpoint>/<relpath>``."""
        return self._file(storage_id, relpath).stat().st_size

    def put_file(
        self, storage_id: str, relpath: str, body: Readable, *, trial_id: int | None = None
    ) -> int:
        """Write ``<checkpoint>/<relpath>`` from ``body`` through a temporary file in the same
        folder, fsynced, then renamed over the path (a retry replaces, a reader never sees half
        a file); the marker first when missing. See ``StorageManager.put_file``."""
        rel = check_relpath(relpath)
        if rel.parts[0] == MARKER_FILE:
            raise ValueError(f"checkpoint file path {relpath!r} is reserved for the marker")
        root = self._dir(storage_id)
        marker = self.marker_path(storage_id)
        root.mkdir(parents=True, exist_ok=True)
        if not marker.exists():
            marker.write_bytes(marker_bytes(storage_id, trial_id))
        root = self._existing_dir(storage_id)
        try:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ValueError(f"checkpoint file path {relpath!r} leads through a file") from None
        parent = (root / rel).parent.resolve()
        if parent != root / rel.parent:  # a link on the way: never write outside the checkpoint
            raise ValueError(f"checkpoint file path {relpath!r} points outside the checkpoint")
        fd, temporary = tempfile.mkstemp(dir=parent, prefix=f".{rel.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as fh:
                shutil.copyfileobj(body, fh, 1024 * 1024)
                size = fh.tell()
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temporary, parent / rel.name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _fsync(str(parent))
        return size

    def delete(self, storage_id: str) -> None:
        """Remove the checkpoint directory (no error when it is already gone); a symbolic link in
        its place is removed itself, never what it points to."""
        path = self._dir(storage_id)
        if path.is_symlink():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)
        self.marker_path(storage_id).unlink(missing_ok=True)

    def read_marker(self, storage_id: str) -> dict[str, object] | None:
        """The marker's fields (``parse_marker``), or None; a link in its place is not read,
        nor the marker of a checkpoint whose folder is missing or a link."""
        try:
            self._existing_dir(storage_id)
            fd = os.open(self.marker_path(storage_id), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:  # missing, a link (ELOOP), unreadable: not provably Headway's
            return None
        with os.fdopen(fd, "rb") as fh:
            return parse_marker(fh.read(MAX_MARKER_BYTES + 1), storage_id)

    def exists(self, storage_id: str) -> bool:
        """Return True when ``<base_path>/<storage_id>`` is a directory (not a symbolic link)."""
        path = self._dir(storage_id)
        return path.is_dir() and not path.is_symlink()

    def list_storage_ids(self) -> dict[str, datetime.datetime]:
        """Every sub-directory of ``base_path`` named like a storage id, with the newest
        modification time of it and the files under it (UTC); ``{}`` when ``base_path`` is
        missing."""
        if not self.base_path.is_dir():
            return {}
        found: dict[str, datetime.datetime] = {}
        for entry in self.base_path.iterdir():
            if entry.is_symlink() or not entry.is_dir() or not is_storage_id(entry.name):
                continue
            newest = entry.stat().st_mtime
            for path in entry.rglob("*"):
                with contextlib.suppress(FileNotFoundError):  # removed while we walk
                    newest = max(newest, path.lstat().st_mtime)
            found[entry.name] = datetime.datetime.fromtimestamp(newest, tz=datetime.UTC)
        return found
