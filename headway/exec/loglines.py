"""Bounding a trial's output before it becomes ``TrialLog`` rows.

A trial's stdout is untrusted: one line may be 50 MB, and PostgreSQL refuses a NUL character in
text (the whole batch insert would fail, and the run's task with it). Lines are read at most
``limit`` characters at a time, longer lines are cut to ``limit`` characters ending with a marker
saying how much was dropped,
and NUL characters become U+FFFD (as undecodable bytes already do).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

REPLACEMENT = "\ufffd"


def clean_line(text: str, limit: int, total: int | None = None) -> str:
    """``text`` without NUL characters (each becomes U+FFFD), at most ``limit`` characters.

    Arguments:
        text (str): one log line, without its newline (or its first characters).
        limit (int): most characters kept, the marker included; a cut line ends with
            ``… [N characters cut]``, so cleaning it again changes nothing.
        total (int | None): the whole line's length when ``text`` is only its beginning.
    """
    text = text.replace("\x00", REPLACEMENT)
    total = len(text) if total is None else total
    if total <= limit:
        return text
    kept = max(limit - len(f"… [{total} characters cut]"), 0)
    return f"{text[:kept]}… [{total - kept} characters cut]"


def read_lines(stream: TextIO, limit: int) -> Iterator[str]:
    """The lines of ``stream`` (without newlines), each cleaned and cut by ``clean_line``.

    Holds at most ``limit + 1`` characters of a line in memory: the rest of an overlong line is
    read and counted in pieces, never joined.
    """
    while line := stream.readline(limit + 1):
        if line.endswith("\n") or len(line) <= limit:  # a whole line (or the last, unended)
            yield clean_line(line.removesuffix("\n"), limit)
            continue
        head, dropped = line[:limit], len(line) - limit
        while rest := stream.readline(limit + 1):
            dropped += len(rest.removesuffix("\n"))
            if rest.endswith("\n"):
                break
        yield clean_line(head, limit, total=limit + dropped)
