"""The worker rides out a short database outage (a PostgreSQL restart, a failover).

While a trial runs, its worker writes log lines, heartbeats the run and checks for a kill
request, each a database call. Before issue #23 the first of them to fail in a one-second
PostgreSQL restart ended the supervision with an exception: the run was reported as "could not
be launched" (exit 1), the trial process was left behind, and the lost-run reaper re-queued the
trial about 80 s later. Now a failed call is retried on a fresh connection: log lines wait in
memory, the heartbeat is sent again, and the run goes on. Only an outage longer than the
heartbeat timeout (``HEADWAY_HEARTBEAT_TIMEOUT_SECONDS``, after which the reaper may give the
trial to another host) stops the trial's processes, as a host that cannot renew its lease
does.

"Transient" means DB-API's ``OperationalError`` / ``InterfaceError`` (``registry.overload``);
any other error is a bug and is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import close_old_connections, connection

from registry.overload import is_database_unavailable

logger = logging.getLogger("headway.worker")

T = TypeVar("T")

RETRY_FIRST_S = 0.5  # first wait before a failed call is tried again; doubles, capped below
RETRY_CAP_S = 5.0


def _drop_broken_connection() -> None:
    # The failed connection is unusable; the next call opens (or borrows) a fresh one. Never
    # inside a transaction (a test's): Django refuses to close it there.
    if not connection.in_atomic_block:
        close_old_connections()
        connection.close()


class DatabaseOutage:
    """Tracks one supervision loop's failing database calls.

    Arguments:
        budget (float): seconds of continuous failure after which ``exceeded`` is True.
    """

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.failing_since: float | None = None
        self._next_try = 0.0
        self._wait = RETRY_FIRST_S
        self.last_error = ""

    def attempt(self, call: Callable[[], object]) -> bool:
        """Run ``call()``; True when it succeeded. A transient database error is recorded (the
        connection dropped) and False returned; the next ``attempt`` before the back-off is
        over returns False without calling."""
        now = time.monotonic()
        if self.failing_since is not None and now < self._next_try:
            return False
        try:
            call()
        except Exception as exc:
            if not is_database_unavailable(exc):
                raise
            _drop_broken_connection()
            if self.failing_since is None:
                self.failing_since = now
                logger.warning("database unavailable, retrying: %s", exc)
            self.last_error = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            self._next_try = now + self._wait
            self._wait = min(self._wait * 2, RETRY_CAP_S)
            return False
        if self.failing_since is not None:
            logger.warning(
                "database reachable again after %.1f s", time.monotonic() - self.failing_since
            )
        self.failing_since = None
        self._wait = RETRY_FIRST_S
        return True

    @property
    def exceeded(self) -> bool:
        """True once calls have failed for ``budget`` seconds without a success."""
        return (
            self.failing_since is not None and time.monotonic() - self.failing_since >= self.budget
        )


def retry_database(call: Callable[[], T], *, budget: float, what: str) -> T:
    """``call()``, retried on transient database errors (fresh connection, capped back-off)
    for up to ``budget`` seconds; then the last error is raised. ``what`` names the call in
    the log."""
    deadline = time.monotonic() + budget
    wait = RETRY_FIRST_S
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_database_unavailable(exc) or time.monotonic() >= deadline:
                raise
            logger.warning("%s: database unavailable (%s); retrying in %.1f s", what, exc, wait)
            _drop_broken_connection()
            time.sleep(wait)
            wait = min(wait * 2, RETRY_CAP_S)
