"""The unmanaged run's output as its trial's logs: what the script prints, shipped by the chief.

A managed trial's output is read from its process by the host agent, which ships it as the
trial's logs; an unmanaged run has no agent, so (as Determined's ``_UnmanagedTrialLogShipper``)
the chief replaces ``sys.stdout`` and ``sys.stderr`` with tees while the run is open: every
write still reaches the original stream, and each complete line is also queued and sent in
batches by a daemon thread (``RegistryAPI.unmanaged_logs``, with the run's token). Each line
carries its ``position`` in the run's output (its line number), so a batch resent after a lost
answer is stored once. While the master is away lines are held (at most ``MAX_HELD_LINES``, the
oldest dropped first) and retried with backoff; ``close()`` restores the streams and delivers
what is held within a bounded wait. Nothing here raises into the script.

Only writes through ``sys.stdout`` / ``sys.stderr`` are seen (``print``, ``logging`` handlers
writing to them, tracebacks); output a subprocess or C code writes to the file descriptors
directly is not.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, TextIO

from headway.client import APIError, RegistryAPI

logger = logging.getLogger("headway.core_v2")

BATCH_LINES = 500  # lines per request (the registry takes up to 5000)
LINE_MAX_CHARS = 64 * 1024  # a longer line is cut here (the registry's default cut)
MAX_HELD_LINES = 100_000  # lines held while the master is away; the oldest are dropped first
FLUSH_INTERVAL_S = 1.0  # how often the sender sends what was printed
RETRY_BACKOFF_MAX_S = 10.0
CLOSE_TIMEOUT_S = 30.0  # how long close() tries to deliver what is held

LogLine = tuple[str, datetime, int]  # (message, when printed, position: 1-based line number)


class _Tee:
    """A text stream that writes to ``original`` and hands the data to ``feed``."""

    def __init__(self, original: TextIO, feed: Any) -> None:
        self._original = original
        self._feed = feed

    def write(self, data: str) -> int:
        with contextlib.suppress(Exception):  # shipping must never break the script's output
            self._feed(data)
        return self._original.write(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty, buffer, ...
        return getattr(self._original, name)


class LogShipper:
    """Ship the process's stdout and stderr lines as the logs of unmanaged run ``run_id``.

    Arguments:
        api (RegistryAPI): the registry, authenticated with the run's token.
        trial_id (int), run_id (int): the run.
        flush_interval (float): seconds between sends.
        close_timeout (float): seconds ``close`` tries to deliver the lines still held.
    """

    def __init__(
        self,
        api: RegistryAPI,
        trial_id: int,
        run_id: int,
        *,
        flush_interval: float = FLUSH_INTERVAL_S,
        close_timeout: float = CLOSE_TIMEOUT_S,
    ) -> None:
        self._api = api
        self._trial_id = trial_id
        self._run_id = run_id
        self._flush_interval = flush_interval
        self._close_timeout = close_timeout
        self._lock = threading.Lock()
        self._held: collections.deque[LogLine] = collections.deque()
        self._partial = ""
        self._position = 0
        self._dropped = 0
        self._refused = False  # the registry refused the run's lines for good (ended, 4xx)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="headway-unmanaged-logs", daemon=True
        )
        self._streams: tuple[TextIO, TextIO] | None = None
        self._closed = False

    @property
    def position(self) -> int:
        """The number of lines queued so far (the last line's position)."""
        return self._position

    def start(self) -> None:
        """Put the tees on ``sys.stdout`` and ``sys.stderr`` and start sending (once)."""
        if self._streams is not None or self._closed:
            return
        self._streams = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(sys.stdout, self._feed)
        sys.stderr = _Tee(sys.stderr, self._feed)
        self._thread.start()

    def _feed(self, data: str) -> None:
        # The sender's own warnings (a logging handler on a tee) would feed themselves.
        if self._closed or self._refused or threading.current_thread() is self._thread:
            return
        now = datetime.now(UTC)
        with self._lock:
            text = self._partial + data
            *complete, self._partial = text.split("\n")
            while len(self._partial) > LINE_MAX_CHARS:  # no newline yet: cut, as the agent does
                complete.append(self._partial[:LINE_MAX_CHARS])
                self._partial = self._partial[LINE_MAX_CHARS:]
            for line in complete:
                self._queue(line, now)
            full = len(self._held) >= BATCH_LINES
        if full:
            self._wake.set()

    def _queue(self, line: str, when: datetime) -> None:
        self._position += 1
        self._held.append((line[:LINE_MAX_CHARS], when, self._position))
        if len(self._held) > MAX_HELD_LINES:
            self._held.popleft()
            self._dropped += 1

    def _run(self) -> None:
        delay = self._flush_interval
        while not self._stop.is_set():
            self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            delivered = self._send_held()
            delay = (
                self._flush_interval if delivered else min(max(delay, 0.5) * 2, RETRY_BACKOFF_MAX_S)
            )

    def _send_held(self) -> bool:
        """Send what is held, a batch at a time; False when the master could not be reached
        (the lines stay held), True otherwise."""
        while True:
            with self._lock:
                batch = list(self._held)[:BATCH_LINES]
                dropped, self._dropped = self._dropped, 0
            if dropped:
                logger.warning(
                    "trial %s: %d output lines dropped while the master was away",
                    self._trial_id,
                    dropped,
                )
            if not batch or self._refused:
                return True
            try:
                self._api.unmanaged_logs(self._trial_id, self._run_id, batch)
            except APIError as exc:
                # No answer (status None), or the master busy or failing: try again later.
                if exc.status is None or exc.status >= 500 or exc.status in (408, 429):
                    logger.warning("trial %s: output lines not sent yet: %s", self._trial_id, exc)
                    return False
                # Ended run (409), revoked token (401/403), a refused batch (400): no later
                # send can succeed, so stop holding lines for it.
                logger.error(
                    "trial %s: output lines refused, no longer sent: %s", self._trial_id, exc
                )
                with self._lock:
                    self._refused = True
                    self._held.clear()
                return True
            except Exception as exc:  # a broken connection: as an unreachable master
                logger.warning("trial %s: output lines not sent yet: %s", self._trial_id, exc)
                return False
            last = batch[-1][2]
            with self._lock:  # the lines sent are the oldest held, unless dropped meanwhile
                while self._held and self._held[0][2] <= last:
                    self._held.popleft()

    def close(self, failed: bool = False) -> None:
        """Restore ``sys.stdout`` / ``sys.stderr``, queue an unended last line and deliver what
        is held, trying for up to ``close_timeout`` seconds; lines still undelivered then are
        logged as lost. Once; never raises. ``failed`` (a close hook's argument) is unused."""
        if self._closed:
            return
        if self._streams is not None:
            # Only our own tees are taken off: a stream replaced after ours stays as it is.
            if isinstance(sys.stdout, _Tee) and sys.stdout._feed == self._feed:
                sys.stdout = self._streams[0]
            if isinstance(sys.stderr, _Tee) and sys.stderr._feed == self._feed:
                sys.stderr = self._streams[1]
        with self._lock:
            self._closed = True
            if self._partial:
                self._queue(self._partial, datetime.now(UTC))
                self._partial = ""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._close_timeout)
        deadline = time.monotonic() + self._close_timeout
        delay = 0.5
        while not self._send_held():
            if time.monotonic() + delay > deadline:
                with self._lock:
                    lost = len(self._held)
                logger.error(
                    "trial %s: %d output lines not delivered: the master is unreachable",
                    self._trial_id,
                    lost,
                )
                return
            time.sleep(delay)
            delay = min(delay * 2, RETRY_BACKOFF_MAX_S)


def start_log_shipper(master_url: str, token: str, trial_id: int, run_id: int) -> LogShipper:
    """A started ``LogShipper`` for run ``run_id`` of ``trial_id``, sending with the run's
    ``token`` to ``master_url``."""
    from headway.client import Session

    api = RegistryAPI.from_session(Session(master_url, token, max_retries=2))
    shipper = LogShipper(api, trial_id, run_id)
    shipper.start()
    return shipper
