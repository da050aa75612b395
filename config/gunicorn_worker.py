"""Headway's gunicorn worker: gthread, serving a kept-alive connection's next request in the
thread that answered the previous one when it arrives within ``FOLLOW_UP_WAIT_S``.

gunicorn's gthread worker hands every kept-alive connection back to its main thread's poller
after each response; the next request on it is then passed to a pool thread again. Those two
hand-offs (a pipe write, two poller registrations, two thread wake-ups, each taking the GIL)
cost about as much as a small API request's own work on a busy host: the SDK's reports, its
checkpoint registrations and a dashboard's polls come back to back on one connection. Here the
answering thread first waits up to ``FOLLOW_UP_WAIT_S`` for the next request (``poll``,
without the GIL) and serves it itself; a connection that stays quiet goes back to the poller
as before, so idle connections still hold no thread, and a thread does not wait while other
connections' requests are queued for one (docs/decisions/operations.md).
"""

from __future__ import annotations

import select
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

# The SDK sends its next request within a millisecond or two of an answer; a thread waits no
# longer than this for it (a 256-thread worker loses at most this long per request).
FOLLOW_UP_WAIT_S = 0.002


def _readable(conn: Any, timeout: float) -> bool:
    """Whether ``conn`` holds (buffered by the parser) or receives request bytes within
    ``timeout`` seconds."""
    if conn.parser is not None and conn.parser.unreader.buf.getvalue():
        return True
    pending = getattr(conn.sock, "pending", None)  # TLS: bytes decrypted but not yet read
    if pending is not None and pending():
        return True
    # poll, not select: a worker holding many connections has descriptors past FD_SETSIZE.
    waiting = select.poll()
    try:
        waiting.register(conn.sock, select.POLLIN)
        return bool(waiting.poll(timeout * 1000))
    except (OSError, ValueError):  # closed meanwhile: gunicorn's own path deals with it
        return False


class FollowUpThreadWorker(ThreadWorker):
    """``gthread`` with the next request of a kept-alive connection served in the same thread
    when it arrives within ``FOLLOW_UP_WAIT_S`` (module docstring)."""

    def handle(self, conn: Any) -> Any:
        """Serve requests on ``conn`` while they follow each other closely; return what
        gunicorn's ``handle`` returned for the last one (keep alive, close or defer)."""
        keep = super().handle(conn)
        while (
            keep is True
            and self.alive
            and not getattr(conn, "is_http2", False)
            and _readable(conn, FOLLOW_UP_WAIT_S if self._pool_idle() else 0.0)
        ):
            keep = super().handle(conn)
        return keep

    def _pool_idle(self) -> bool:
        """Whether no request waits for a thread of this worker (then a thread may wait)."""
        # ThreadPoolExecutor's queue of submitted work; should a gunicorn release change its
        # pool, threads still wait at most FOLLOW_UP_WAIT_S.
        queued = getattr(self.tpool, "_work_queue", None)
        return queued is None or queued.empty()
