"""``python -m headway.launch.wrap_rank [--no-redirect-stdio] RANK [--] CMD...``.

Runs ``CMD`` and prefixes every line it writes with its rank, ``[rank=N] || ``, as Determined's
``determined.launch.wrap_rank``. ``headway.launch.torch_distributed`` runs each of torchrun's
ranks under it (as Determined's launcher does), and custom launchers that start one process per
slot themselves use it too (``core_api/4_distributed.py``), so a trial's log reads the same
whichever launcher started a rank.

- ``RANK``: an integer, or a comma-separated list of environment variable names tried in
  order (e.g. ``RANK,OMPI_COMM_WORLD_RANK``).
- Lines end at ``\\n`` or ``\\r`` (progress bars), and are cut every 8 KiB; the child's stdout
  goes to stdout and its stderr to stderr.
- A line is written only once it is whole: a rank that writes ``{"a": 1}`` and its ``\\n``
  in two calls (as ``print`` does under ``PYTHONUNBUFFERED``) still gives one line. (torchrun's
  own ``--tee`` prefixes whatever it reads at the end of a rank's log file, so such a line could
  come out cut in two, with a stray prefix in its middle.)
- Signals sent to this process (SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2) are passed on to the
  command, except those it started with ignored: they stay ignored, for the command too (a batch
  scheduler's warning signal, SIGUSR1, under ``headway.exec.guard --ignore-usr1``). The exit status is the
  command's (128 + N when a signal N ended it).
- ``--no-redirect-stdio`` is accepted for Determined's command lines: there it stops the output
  from going to the container's own stdout files; Headway always writes to this process's
  stdout / stderr, which the worker captures as the trial's log.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import string
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import IO

RANK_PREFIX = "[rank=${rank}] || "  # a string.Template, as torchrun's log_line_prefix_template
LINE_LIMIT = 8192  # bytes per line at most (Determined: io.DEFAULT_BUFFER_SIZE)
_LINE_END = re.compile(rb"[\r\n]")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


class WrapRankError(Exception):
    """A bad command line or rank, reported as one line."""


def prefix(rank: int) -> bytes:
    """The bytes put before each line of rank ``rank`` (``RANK_PREFIX`` filled in)."""
    return string.Template(RANK_PREFIX).substitute(rank=rank).encode()


def resolve_rank(value: str, environ: Mapping[str, str] | None = None) -> int:
    """``RANK`` as given: an integer, or the first of the named variables that is set.

    Raises:
        WrapRankError: naming the variables when none is set, or a value that is no integer.
    """
    env = os.environ if environ is None else environ
    if value.isdigit():
        return int(value)
    for name in value.split(","):
        if name in env:
            try:
                return int(env[name])
            except ValueError:
                raise WrapRankError(f"${name}={env[name]!r} is not an integer rank") from None
    raise WrapRankError(f"rank variables {value} are not set in the environment")


def read_lines(read: IO[bytes]) -> Iterator[bytes]:
    """Lines of a byte stream, each ending in ``\\n``: ``\\r`` also ends one, and a line
    longer than ``LINE_LIMIT`` is cut there."""
    pending = b""
    while True:
        chunk = read.read(LINE_LIMIT)
        if not chunk:
            break
        pending += chunk
        while True:
            match = _LINE_END.search(pending)
            if match is None:
                break
            yield pending[: match.start()] + b"\n"
            pending = pending[match.end() :]
        while len(pending) >= LINE_LIMIT:
            yield pending[:LINE_LIMIT] + b"\n"
            pending = pending[LINE_LIMIT:]
    if pending:
        yield pending + b"\n"


def forward(source: IO[bytes], fd: int, rank: int) -> None:
    """Copy ``source`` to the file descriptor ``fd``, each line prefixed with the rank."""
    head = prefix(rank)
    for line in read_lines(source):
        os.write(fd, head + line)


def parse_args(argv: Sequence[str]) -> tuple[int, list[str]]:
    """``(rank, command)`` from the command line.

    Raises:
        WrapRankError: no command, or a rank that cannot be resolved.
    """
    parser = argparse.ArgumentParser(
        prog="python -m headway.launch.wrap_rank",
        usage="%(prog)s [--no-redirect-stdio] RANK [--] CMD...",
        description="Prefix each output line of CMD with its rank.",
    )
    parser.add_argument("--no-redirect-stdio", action="store_true")
    parser.add_argument("rank", metavar="RANK")
    parser.add_argument("command", metavar="CMD...", nargs=argparse.REMAINDER)
    args = parser.parse_args(list(argv))
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise WrapRankError("no command to run after RANK")
    return resolve_rank(args.rank), command


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with prefixed output; return its exit status (2 on a usage error)."""
    try:
        rank, command = parse_args(sys.argv[1:] if argv is None else argv)
    except WrapRankError as exc:
        print(f"wrap_rank: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    # After the start: the command inherits this process's dispositions, ignored ones included.
    for signum in _FORWARDED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, lambda signum, _frame: proc.send_signal(signum))
    assert proc.stdout is not None and proc.stderr is not None
    threads = [
        threading.Thread(target=forward, args=(proc.stdout, sys.stdout.fileno(), rank)),
        threading.Thread(target=forward, args=(proc.stderr, sys.stderr.fileno(), rank)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    code = proc.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
