"""Stream a checkpoint as a gzipped tar or a zip, or one file (a byte range of it), from storage.

Siblings of ``iter_tar_chunks``: every generator reads the stored files piece by piece, so memory
stays around a few ``chunk_size`` whatever the checkpoint size, and nothing is written to disk.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Protocol, cast

from headway.storage._base import StorageManager
from headway.storage._tar import _read_exactly, iter_tar_chunks

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
