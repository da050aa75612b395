"""A bounded pre-scan of an uploaded ``tar.gz``, before ``tarfile`` parses any of its headers.

Python 3.11.7's ``tarfile`` parses PAX extended headers with regular expressions that backtrack
(CVE-2024-6232): one crafted 100 KB header costs minutes of CPU, and a header of records with
tiny lengths makes it build gigabytes of keywords. This scan walks the gzip stream and the tar
headers itself, in bounded memory (one decompressed chunk, one extended header), and refuses:

- data after the end of the gzip stream, or a truncated stream;
- an extended header (PAX ``x``/``g``/``X``, GNU long name ``L``/``K``) over
  ``MAX_EXTENDED_HEADER_BYTES``, over ``MAX_EXTENDED_HEADERS_TOTAL`` of them in all, or more
  than ``2 * MAX_MEMBERS`` headers; more decompressed data than the unpacked limit allows;
- a PAX header that is not a list of well-formed ``"<length> <keyword>=<value>\\n"`` records,
  that holds a run of more than ``_MAX_DIGIT_RUN`` digits (the backtracking regex's fuel), or
  that declares GNU sparse data (``tarfile`` parses it with more regexes; packers never write it);
- GNU sparse members (type ``S``).

What passes costs ``tarfile`` time linear in its size. Never imports Django.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator

from headway.archive._rules import (
    MAX_MEMBERS,
    MAX_MODEL_DEF_BYTES,
    UNPACKED_FACTOR,
    ModelDefinitionError,
    _too_large,
)

MAX_EXTENDED_HEADER_BYTES = 64 * 1024
"""Largest PAX or GNU long-name header accepted, in bytes (a path is at most 4 KiB on Linux)."""

MAX_EXTENDED_HEADERS_TOTAL = 8 * 1024 * 1024
"""Most bytes of extended headers in one archive (bsdtar writes a few hundred per file)."""

_BLOCK = 512
_CHUNK = 1024 * 1024  # decompressed bytes held at a time
_EXTENDED = frozenset(b"xgXLK")
_PAX = frozenset(b"xgX")
_MAX_DIGIT_RUN = 20  # Python's own fix caps the record length at 20 digits
_DIGIT_RUN = re.compile(rb"[0-9]{%d}" % (_MAX_DIGIT_RUN + 1))


def _invalid(reason: str) -> ModelDefinitionError:
    return ModelDefinitionError(f"model definition is not a valid tar.gz archive: {reason}")


def _decompressed(data: bytes, limit: int) -> Iterator[bytes]:
    """The gzip stream's content, ``_CHUNK`` bytes at a time; refuses trailing or missing data
    and more than ``limit`` bytes in all (a stream of zeros compresses a thousandfold)."""
    stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = data
    total = 0
    try:
        while not stream.eof:
            chunk = stream.decompress(pending, _CHUNK)
            pending = stream.unconsumed_tail
            if not chunk and not pending:
                break  # the input ended before the stream did
            total += len(chunk)
            if total > limit:
                raise _too_large(limit // UNPACKED_FACTOR)
            if chunk:
                yield chunk
    except zlib.error as exc:
        raise _invalid(f"bad gzip data ({exc})") from None
    if not stream.eof:
        raise _invalid("the gzip stream is truncated")
    if stream.unused_data:
        raise _invalid(
            f"{len(stream.unused_data)} bytes of trailing data after the end of the gzip stream"
        )


class _Blocks:
    """Reads the decompressed tar stream block by block, holding at most one chunk."""

    def __init__(self, data: bytes, limit: int) -> None:
        self._chunks = _decompressed(data, limit)
        self._buffer = bytearray()
        self.offset = 0

    def _fill(self, n: int) -> None:
        while len(self._buffer) < n:
            chunk = next(self._chunks, None)
            if chunk is None:
                return
            self._buffer += chunk

    def read(self, n: int) -> bytes:
        """The next ``n`` bytes (fewer at the end of the stream)."""
        self._fill(n)
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        self.offset += len(out)
        return out

    def skip(self, n: int) -> bool:
        """Skip ``n`` bytes; False when the stream ends first."""
        while n > 0:
            self._fill(min(n, _CHUNK))
            if not self._buffer:
                return False
            step = min(n, len(self._buffer))
            del self._buffer[:step]
            self.offset += step
            n -= step
        return True

    def drain(self) -> None:
        """Read to the end, so that the gzip stream's end (and what follows it) is checked."""
        for _ in self._chunks:
            pass


def _size_field(header: bytes, offset: int) -> int:
    field = header[124:136]
    if field[0] & 0x80:  # GNU base-256
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not re.fullmatch(rb"[0-7]+", text):
        raise _invalid(f"bad size field in the tar header at offset {offset}")
    return int(text, 8)


def _has_data(header: bytes, kind: int) -> bool:
    """Whether ``tarfile`` skips data after this header: regular files and unknown types."""
    if kind == 0 and header[:100].split(b"\0", 1)[0].endswith(b"/"):
        return False  # an old-style folder, which tarfile reads as one
    return kind in b"0\x007" or kind not in b"123456"


def check_pax_records(buf: bytes, offset: int = 0) -> int | None:
    """Check that a PAX header's data is well-formed records that ``tarfile`` parses linearly.

    Arguments:
        buf (bytes): the header's data (its declared size, without block padding).
        offset (int): where the header starts in the tar stream, for messages.

    Returns:
        int | None: the member size the header declares (its ``size`` record), if any.

    Raises:
        ModelDefinitionError: a malformed record, a run of more than 20 digits, or a GNU sparse
            keyword.
    """
    if _DIGIT_RUN.search(buf):
        raise _invalid(
            f"the PAX header at offset {offset} holds a run of more than {_MAX_DIGIT_RUN} digits"
            " (refused: it drives a slow regular expression in tarfile, CVE-2024-6232)"
        )
    pos = 0
    size: int | None = None
    while pos < len(buf):
        space = buf.find(b" ", pos, pos + _MAX_DIGIT_RUN + 1)
        length_text = buf[pos:space] if space > pos else b""
        if not length_text.isdigit():
            raise _invalid(f"malformed PAX record at offset {offset + pos}")
        end = pos + int(length_text)
        equals = buf.find(b"=", space + 1, end)
        if end > len(buf) or buf[end - 1 : end] != b"\n" or equals <= space + 1:
            raise _invalid(f"malformed PAX record at offset {offset + pos}")
        keyword = buf[space + 1 : equals]
        if keyword.startswith(b"GNU.sparse"):
            raise _invalid("GNU sparse members are not accepted")
        if keyword == b"size":
            value = buf[equals + 1 : end - 1]
            if not value.isdigit():
                raise _invalid(f"malformed PAX size record at offset {offset + pos}")
            size = int(value)
        pos = end
    return size


def prescan_tar_gz(data: bytes, max_bytes: int = MAX_MODEL_DEF_BYTES) -> None:
    """Walk a ``tar.gz``'s gzip stream and tar headers with bounded memory and time.

    Arguments:
        data (bytes): the archive as uploaded.
        max_bytes (int): the packed-size limit; the tar stream may be ``UNPACKED_FACTOR`` times
            it plus 2 KiB a member and the extended headers.

    Raises:
        ModelDefinitionError: what this module's docstring lists, or an unreadable stream.
    """
    limit = UNPACKED_FACTOR * max_bytes + 2048 * MAX_MEMBERS + MAX_EXTENDED_HEADERS_TOTAL
    blocks = _Blocks(data, limit)
    headers = 0
    extended = 0
    pax_size: int | None = None  # a PAX "size" record overrides the next member's size field
    while True:
        offset = blocks.offset
        header = blocks.read(_BLOCK)
        if len(header) < _BLOCK:
            raise _invalid("unexpected end of the tar data") if header else _invalid("empty")
        if header == bytes(_BLOCK):
            break  # end-of-archive marker; tarfile stops here too
        headers += 1
        if headers > 2 * MAX_MEMBERS:  # each member may have one extended header
            raise ModelDefinitionError(
                f"model definition has more than {MAX_MEMBERS} files and folders"
            )
        kind = header[156]
        size = _size_field(header, offset)
        if kind not in _EXTENDED and pax_size is not None:
            size, pax_size = pax_size, None
        padded = -(-size // _BLOCK) * _BLOCK
        if kind == ord("S"):
            raise _invalid("GNU sparse members are not accepted")
        if kind in _EXTENDED:
            extended += size
            if size > MAX_EXTENDED_HEADER_BYTES or extended > MAX_EXTENDED_HEADERS_TOTAL:
                raise _invalid(
                    f"the extended header at offset {offset} is {size} bytes; the limits are"
                    f" {MAX_EXTENDED_HEADER_BYTES} bytes a header and"
                    f" {MAX_EXTENDED_HEADERS_TOTAL} bytes in all"
                )
            body = blocks.read(padded)
            if len(body) < padded:
                raise _invalid("unexpected end of the tar data")
            declared = check_pax_records(body[:size], offset + _BLOCK) if kind in _PAX else None
            if declared is not None and kind == ord("g"):
                raise _invalid("a global PAX header may not declare a size")
            pax_size = declared if declared is not None else pax_size
        elif _has_data(header, kind) and not blocks.skip(padded):  # never held in memory
            raise _invalid("unexpected end of the tar data")
    blocks.drain()
