"""``StorageManager``: where checkpoint files live, independent of who wrote them.

The interface follows Determined's ``common/storage`` managers (``store_path`` / ``restore_path``
context managers around a storage id) plus the read-side calls the registry needs to stream
downloads (``list_files``, ``open_file``).
"""

from __future__ import annotations

import abc
import contextlib
import datetime
import json
import os
import pathlib
import re
from collections.abc import Iterator
from typing import BinaryIO, Protocol

from headway.archive import check_member_path

# Storage ids become directory names and URL segments; allow uuids and similar tokens only, so a
# hostile id ("../x", "a/b") can never address anything outside the storage root.
_STORAGE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_storage_id(storage_id: str) -> str:
    """Return ``storage_id`` unchanged if it is a safe single path segment.

    Raises:
        ValueError: when it is empty, contains ``/``, ``\\``, starts with ``.`` or has other
            characters than letters, digits, ``.``, ``_`` and ``-``.
    """
    if not isinstance(storage_id, str) or not _STORAGE_ID_RE.fullmatch(storage_id):
        raise ValueError(f"invalid checkpoint storage id {storage_id!r}")
    return storage_id


def is_storage_id(name: str) -> bool:
    """Whether ``name`` passes ``check_storage_id`` (listings skip anything else)."""
    return isinstance(name, str) and _STORAGE_ID_RE.fullmatch(name) is not None


class Readable(Protocol):
    """A byte stream ``put_file`` reads: a file, a request body."""

    def read(self, size: int = -1, /) -> bytes: ...


MARKER_FILE = ".headway-checkpoint.json"
"""The checkpoint marker, written by ``store_path`` before any file of a checkpoint: proof for
the registry's orphan clean-up that a folder (or key prefix) is a Headway checkpoint and which
trial wrote it (docs/checkpoints.md, "Orphans"). S3: the object ``<prefix>/<uuid>/`` + this
name, left out of ``list_files``; shared_fs: ``<base>/.<uuid>`` + this name, next to the
checkpoint's folder (``SharedFSStorageManager.marker_path``)."""
MAX_MARKER_BYTES = 4096


def marker_bytes(storage_id: str, trial_id: int | None = None) -> bytes:
    """The marker of checkpoint ``storage_id``: JSON ``{"headway_checkpoint": storage_id,
    "trial_id": int | null}``. ``trial_id`` defaults to ``$HEADWAY_TRIAL_ID``, which the worker
    sets for every trial process (null in local mode); the registry passes the trial whose
    upload it writes (``put_file``)."""
    if trial_id is None:
        raw = os.environ.get("HEADWAY_TRIAL_ID", "")
        trial_id = int(raw) if raw.isdigit() else None
    return json.dumps({"headway_checkpoint": storage_id, "trial_id": trial_id}).encode()


def parse_marker(data: bytes, storage_id: str) -> dict[str, object] | None:
    """The marker's fields when ``data`` is the marker of ``storage_id``, else None (not JSON,
    too long, another id, or not a mapping)."""
    if len(data) > MAX_MARKER_BYTES:
        return None
    try:
        fields = json.loads(data)
    except ValueError:
        return None
    if not isinstance(fields, dict) or fields.get("headway_checkpoint") != storage_id:
        return None
    return fields


def check_relpath(relpath: str) -> pathlib.PurePosixPath:
    """Validate a file path relative to a checkpoint and return it as a ``PurePosixPath``.

    The safety rule is ``headway.archive.check_member_path``, the one every archive member passes;
    storage adds that the path be canonical, because it is also an
    object key (``"a//b"`` and ``"a/b"`` would be different S3 objects).

    Raises:
        ValueError: for an empty, absolute or backslashed path, one containing ``..`` or a NUL
            (``UnsafeArchivePath``), or one with ``""`` or ``"."`` segments or a trailing ``/``.
    """
    path = check_member_path(relpath, what="checkpoint file path")
    if not path.parts or str(path) != relpath:
        raise ValueError(f"checkpoint file path {relpath!r} is not canonical (no '', '.' segments)")
    return path


def list_local_files(root: pathlib.Path, *, marker: bool = False) -> dict[str, int]:
    """Map every regular file under ``root`` (recursively) to its size in bytes.

    Keys are POSIX relative paths (``"sub/model.pt"``). Symbolic links are skipped, so a listing
    never points outside ``root``. The checkpoint marker (``MARKER_FILE``) at the top is left
    out unless ``marker`` is True (an upload of the directory includes it).
    """
    resources: dict[str, int] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        resources[path.relative_to(root).as_posix()] = path.stat().st_size
    if not marker:
        resources.pop(MARKER_FILE, None)
    return resources


class StorageManager(abc.ABC):
    """Stores checkpoints as directories of files addressed by a storage id (a uuid string).

    Subclasses: ``SharedFSStorageManager`` (a directory shared by all hosts) and
    ``S3StorageManager``. Layout in every backend: ``<base>/<storage_id>/<files>``, plus the
    checkpoint's marker (``MARKER_FILE``) written first by ``store_path``.
    """

    @abc.abstractmethod
    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield a local directory to write checkpoint ``storage_id`` into.

        On normal exit the files are in storage (uploaded if the backend is remote). If the block
        raises, everything written is deleted and the exception propagates.
        """

    @abc.abstractmethod
    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield a local directory holding the files of ``storage_id``; valid inside the block.

        Raises:
            FileNotFoundError: when the checkpoint does not exist.
        """

    @abc.abstractmethod
    def list_files(self, storage_id: str) -> dict[str, int]:
        """Return ``{relative path: size in bytes}`` for every file of the checkpoint.

        Raises:
            FileNotFoundError: when the checkpoint does not exist.
        """

    @abc.abstractmethod
    def open_file(
        self, storage_id: str, relpath: str, *, start: int = 0, end: int | None = None
    ) -> BinaryIO:
        """Open one file of a checkpoint for streaming binary reads; the caller closes it.

        Arguments:
            start (int): first byte to read (0-based); the stream begins there.
            end (int | None): byte offset after the last one wanted (exclusive); None: to the
                end of the file. A backend may yield bytes past ``end`` (shared_fs does): read
                ``end - start`` bytes.

        Raises:
            ValueError: when ``relpath`` is absolute or contains ``..``.
            FileNotFoundError: when the checkpoint or file does not exist.
        """

    @abc.abstractmethod
    def file_size(self, storage_id: str, relpath: str) -> int:
        """Return the stored size in bytes of one file of a checkpoint.

        Raises:
            ValueError: when ``relpath`` is absolute or contains ``..``.
            FileNotFoundError: when the checkpoint or file does not exist.
        """

    def presigned_url(
        self,
        storage_id: str,
        relpath: str,
        expires_s: int = 300,
        content_disposition: str | None = None,
    ) -> str:
        """A time-limited URL that GETs one file with no credentials (S3 only).

        Raises:
            NotImplementedError: for a backend without presigned URLs (shared_fs).
        """
        raise NotImplementedError(f"{type(self).__name__} has no presigned URLs")

    def put_file(
        self, storage_id: str, relpath: str, body: Readable, *, trial_id: int | None = None
    ) -> int:
        """Write one file of checkpoint ``storage_id`` from the stream ``body`` (read to its end
        in pieces, never whole) and return its size in bytes; the marker is written first when
        the checkpoint has none (naming ``trial_id``). Writing the same path again replaces the
        file: an upload retried is stored once. The registry's side of uploads through the
        master (``MasterStorageManager``).

        Raises:
            ValueError: ``relpath`` is not a safe canonical path (``check_relpath``), is the
                marker's name, or leads through a file or link.
            NotImplementedError: for a backend that cannot write single files.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot write single files")

    @abc.abstractmethod
    def delete(self, storage_id: str) -> None:
        """Delete every file of the checkpoint; deleting a missing checkpoint is not an error."""

    @abc.abstractmethod
    def read_marker(self, storage_id: str) -> dict[str, object] | None:
        """The fields of the checkpoint's marker (``MARKER_FILE``, see ``parse_marker``), or
        None when it has none or an invalid one: then the files are not provably Headway's."""

    @abc.abstractmethod
    def exists(self, storage_id: str) -> bool:
        """Return True when the checkpoint has at least one stored file (or directory)."""

    def list_storage_ids(self) -> dict[str, datetime.datetime]:
        """Map every storage id present in this storage to its newest file's modification time.

        Used by the registry's garbage collection to find orphans (files no registered
        checkpoint owns, e.g. an upload that crashed). Times are timezone-aware (UTC); an id
        whose directory holds no file maps to the directory's own modification time.

        Raises:
            NotImplementedError: for a backend that cannot list its checkpoints.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list its storage ids")
