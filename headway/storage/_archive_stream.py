"""Stream a checkpoint as a gzipped tar or a zip, or one file (a byte range of it), from storage.

Siblings of ``iter_tar_chunks``: every generator reads the stored files piece by piece, so memory
stays around a few ``chunk_size`` whatever the checkpoint size, and nothing is written to disk.
"""

from __future__ import annotations

import io
import logging
import os
import stat
import zlib
from collections.abc import Iterator
from typing import BinaryIO, Protocol, cast

from headway.storage._base import StorageManager
from headway.storage._tar import _read_exactly, iter_tar_chunks

logger = logging.getLogger("headway.storage")

CHUNK_SIZE = 1 << 20
# gzip level 1: checkpoints are mostly float tensors that deflate barely shrinks, so a higher
# level would cost several times the CPU for a few percent of bytes.
TGZ_LEVEL = 1


def iter_file_chunks(
    manager: StorageManager,
    storage_id: str,
    relpath: str,
    start: int,
    end: int,
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[bytes]:
    """Yield bytes ``[start, end)`` of one stored file in pieces of at most ``chunk_size``.

    The file is opened at the first ``next()`` (so a generator that is never started opens
    nothing). If the stored file is shorter than ``end``, the missing bytes are zeros (logged),
    as ``iter_tar_chunks`` does, so a declared ``Content-Length`` always holds.

    Raises:
        FileNotFoundError: when the file is missing (at the first ``next()``).
    """
    with manager.open_file(storage_id, relpath, start=start, end=end) as fh:
        yield from _read_exactly(fh, end - start, chunk_size, relpath)


class FileRange:
    """Bytes ``[start, end)`` of one stored file as a file object, for a WSGI file wrapper.

    ``read(n)`` never goes past ``end`` and pads with zeros (logged) when the stored file is
    shorter, as ``iter_file_chunks`` does, so a declared ``Content-Length`` holds. ``fileno()``
    is the stored file's descriptor, positioned at ``start``, when it has one (shared_fs): then
    gunicorn sends the range with ``sendfile`` (the kernel copies page cache to socket, no
    Python loop; Django's ``FileResponse`` hands the object to ``wsgi.file_wrapper``); an S3
    body has none, and is read in ``read`` calls.
    """

    def __init__(self, fh: BinaryIO, length: int, relpath: str) -> None:
        self._fh = fh
        self._left = length
        self._relpath = relpath

    def fileno(self) -> int:
        """The stored file's descriptor, or ``io.UnsupportedOperation`` (no sendfile) when it
        has none or is not a regular file (an HTTP body's socket)."""
        try:
            fd = self._fh.fileno()
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except (AttributeError, OSError) as exc:
            raise io.UnsupportedOperation("no file descriptor") from exc
        if not regular:
            raise io.UnsupportedOperation("not a regular file")
        return fd

    def read(self, size: int = -1) -> bytes:
        """At most ``size`` bytes (all that is left for ``size < 0``); ``b""`` at the end."""
        want = self._left if size < 0 else min(size, self._left)
        if want <= 0:
            return b""
        piece = self._fh.read(want)
        if not piece:
            logger.warning("checkpoint file %s shrank while streaming; padding", self._relpath)
            piece = b"\0" * want
        self._left -= len(piece)
        return piece

    def close(self) -> None:
        """Close the stored file."""
        self._fh.close()


def open_file_range(
    manager: StorageManager, storage_id: str, relpath: str, start: int, end: int
) -> FileRange:
    """Open bytes ``[start, end)`` of one stored file (``FileRange``); the caller closes it.

    Raises:
        FileNotFoundError: when the file is missing.
    """
    return FileRange(
        manager.open_file(storage_id, relpath, start=start, end=end), end - start, relpath
    )


def iter_tgz_chunks(
    manager: StorageManager,
    storage_id: str,
    files: dict[str, int] | None = None,
    level: int = TGZ_LEVEL,
) -> Iterator[bytes]:
    """Yield a gzip stream (RFC 1952) of the checkpoint's tar (``iter_tar_chunks``).

    Arguments:
        files (dict[str, int] | None): ``{relative path: size}``; listed from storage when None.
        level (int): zlib compression level, 1 (fast) to 9.
    """
    compressor = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip container
    for chunk in iter_tar_chunks(manager, storage_id, files=files):
        out = compressor.compress(chunk)
        if out:
            yield out
    yield compressor.flush()


class SizedChunks(Protocol):
    """An iterable of bytes whose ``len()`` is the total size in bytes."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[bytes]: ...


def zip_stream(manager: StorageManager, storage_id: str, files: dict[str, int]) -> SizedChunks:
    """A zip (stored, not deflated) of ``files`` of the checkpoint, built as it is read.

    Uses ``zipstream-ng``: ZIP64 records are written when a file or the archive passes 4 GiB,
    and the total size is known in advance (``len()``), so the answer gets a ``Content-Length``.

    Arguments:
        files (dict[str, int]): ``{relative path: size}`` as stored (``manager.list_files``).
    """
    from zipstream import ZipStream  # server-side only: trial processes never build zips

    archive = ZipStream(sized=True)
    for relpath in sorted(files):
        size = files[relpath]
        archive.add(iter_file_chunks(manager, storage_id, relpath, 0, size), relpath, size=size)
    return cast(SizedChunks, archive)
