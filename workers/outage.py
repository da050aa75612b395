"""The host rides out a short outage of the master (a restart, a failover, a network cut).

While a trial runs, its host sends log lines, heartbeats the run and learns of a kill request,
each a call to the master (``workers.link``). A failed call is retried: log lines wait in
memory, the heartbeat is sent again, and the run goes on (before this, the first failure
in a one-second database restart ended the supervision and left the trial process behind).
Only an outage longer than the outage tolerance (``HEADWAY_OUTAGE_TOLERANCE_SECONDS``, after
which the master may give the trial to another host) stops the trial's processes, as a host
that cannot renew its lease does (``workers.leases``).

"Transient" is ``workers.link.is_master_unavailable`` (no answer, 5xx, 429); any other error
is a bug or a refusal and is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from workers.link import is_master_unavailable

logger = logging.getLogger("headway.worker")

T = TypeVar("T")

RETRY_FIRST_S = 0.5  # first wait before a failed call is tried again; doubles, capped below
RETRY_CAP_S = 5.0


class MasterOutage:
    """Tracks one supervision loop's failing calls to the master.

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
        """Run ``call()``; True when it succeeded. A transient failure is recorded and False
        returned; the next ``attempt`` before the back-off is
        over returns False without calling."""
        now = time.monotonic()
        if self.failing_since is not None and now < self._next_try:
            return False
        try:
            call()
        except Exception as exc:
            if not is_master_unavailable(exc):
                raise
            if self.failing_since is None:
                self.failing_since = now
                logger.warning("master unavailable, retrying: %s", exc)
            self.last_error = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            self._next_try = now + self._wait
            self._wait = min(self._wait * 2, RETRY_CAP_S)
            return False
        if self.failing_since is not None:
            logger.warning(
                "master reachable again after %.1f s", time.monotonic() - self.failing_since
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


def retry_master(call: Callable[[], T], *, budget: float, what: str) -> T:
    """``call()``, retried on transient failures (``is_master_unavailable``; capped back-off)
    for up to ``budget`` seconds; then the last error is raised. ``what`` names the call in
    the log."""
    deadline = time.monotonic() + budget
    wait = RETRY_FIRST_S
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_master_unavailable(exc) or time.monotonic() >= deadline:
                raise
            logger.warning("%s: master unavailable (%s); retrying in %.1f s", what, exc, wait)
            time.sleep(wait)
            wait = min(wait * 2, RETRY_CAP_S)
