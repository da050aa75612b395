"""Stream a checkpoint as an uncompressed tar built on the fly, with bounded memory.

The registry wraps ``iter_tar_chunks`` in a ``StreamingHttpResponse``:
no temporary archive, no whole file in memory. The byte layout is plain POSIX tar (PAX headers for
long or non-ASCII names), so ``tarfile`` and GNU tar read it.
"""

from __future__ import annotations

import logging
import tarfile
import time
from collections.abc import Iterator
from typing import BinaryIO

from headway.archive import check_member_path
from headway.storage._base import StorageManager

logger = logging.getLogger("headway.storage")

_BLOCK = tarfile.BLOCKSIZE  # 512
_RECORD = tarfile.RECORDSIZE  # 10240: tar archives end on a record boundary


def iter_tar_chunks(
    manager: StorageManager,
    storage_id: str,
    chunk_size: int = 1 << 20,
    files: dict[str, int] | None = None,
) -> Iterator[bytes]:
    """Yield the bytes of an uncompressed tar holding every file of checkpoint ``storage_id``.

    Member names are the files' relative paths (``"model.pt"``, ``"sub/x.bin"``), in sorted order;
    each file is read in ``chunk_size`` pieces, so memory stays around ``2 * chunk_size`` bytes
    whatever the checkpoint size.

    Arguments:
        manager (StorageManager): where the checkpoint lives.
        storage_id (str): the checkpoint uuid.
        chunk_size (int): target size in bytes of each yielded chunk (the last may be shorter).
        files (dict[str, int] | None): ``{relative path: size}`` to archive, as listed by
            ``manager.list_files`` (listed here when None).

    Raises:
        FileNotFoundError: when the checkpoint does not exist (raised by the first ``next()``).

    A file that shrank since it was listed is padded with zeros (and logged) so the archive stays
    well-formed; bytes added after listing are not sent.
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if files is None:
        files = manager.list_files(storage_id)
    mtime = int(time.time())
    buffer = bytearray()
    total = 0
    for relpath in sorted(files):
        # Never emit a member that could escape on extraction (the rule every archive follows).
        check_member_path(relpath, what="checkpoint file path")
        size = files[relpath]
        header = _member_header(relpath, size, mtime)
        buffer += header
        total += len(header)
        with manager.open_file(storage_id, relpath) as fh:
            for piece in _read_exactly(fh, size, chunk_size, relpath):
                if len(piece) >= chunk_size // 2:
                    # Big pieces go out as read: copying them into the buffer would cost a
                    # memcpy per byte for nothing.
                    if buffer:
                        yield bytes(buffer)
                        buffer.clear()
                    yield piece
                    continue
                buffer += piece
                if len(buffer) >= chunk_size:
                    yield bytes(buffer)
                    buffer.clear()
        total += size
        padding = (-size) % _BLOCK
        buffer += b"\0" * padding
        total += padding
        if len(buffer) >= chunk_size:
            yield bytes(buffer)
            buffer.clear()
    buffer += b"\0" * _end_length(total)
    while buffer:
        yield bytes(buffer[:chunk_size])
        del buffer[:chunk_size]


def tar_size(files: dict[str, int]) -> int:
    """The exact length in bytes of ``iter_tar_chunks(..., files=files)``'s archive, known
    before a byte is read (the registry's ``Content-Length``, so clients show progress).

    Each member is its header (512 bytes, more with PAX records for a long or non-ASCII name),
    its size rounded up to 512, then the end blocks up to a 10,240-byte record. The member's
    modification time does not change a header's length (an integer second within the octal
    field), so any time gives the length.

    Raises:
        UnsafeArchiveMember: a path that could escape on extraction (as ``iter_tar_chunks``).
    """
    total = 0
    for relpath, size in files.items():
        check_member_path(relpath, what="checkpoint file path")
        total += len(_member_header(relpath, size, 0)) + size + (-size) % _BLOCK
    return total + _end_length(total)


def _end_length(members: int) -> int:
    """Bytes after ``members`` bytes of members: two zero blocks, then zeros up to the record
    boundary (as tarfile writes)."""
    end = 2 * _BLOCK
    return end + (-(members + end)) % _RECORD


def _member_header(relpath: str, size: int, mtime: int) -> bytes:
    info = tarfile.TarInfo(relpath)
    info.size = size
    info.mtime = mtime
    info.mode = 0o644
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _read_exactly(fh: BinaryIO, size: int, chunk_size: int, relpath: str) -> Iterator[bytes]:
    remaining = size
    while remaining > 0:
        piece = fh.read(min(chunk_size, remaining))
        if not piece:
            logger.warning("checkpoint file %s shrank while streaming; padding with zeros", relpath)
            while remaining > 0:
                pad = min(chunk_size, remaining)
                yield b"\0" * pad
                remaining -= pad
            return
        remaining -= len(piece)
        yield piece
