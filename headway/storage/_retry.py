"""Retries of checkpoint uploads and downloads through a short storage outage.

A storage outage (an S3 endpoint restarting, an NFS server failing over) of up to
``HEADWAY_STORAGE_RETRY_SECONDS`` (default 90) is ridden out: the whole transfer is retried with
capped exponential backoff, each retry logged at WARNING (what, attempt, wait), so it shows in
the trial's log. An error the backend calls permanent (access denied, no such bucket, disk
full) is raised at once. The backends decide which errors are transient
(``S3StorageManager`` / ``SharedFSStorageManager``); this module only loops.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger("headway.storage")

DEFAULT_RETRY_SECONDS = 90.0
FIRST_DELAY_S = 0.5  # first wait; doubles per failure
MAX_DELAY_S = 10.0

T = TypeVar("T")

# shared_fs errors worth retrying: each is what a network file system answers while its server
# or transport is away and comes back on its own (docs/decisions/checkpoints.md). EIO is in:
# an NFS soft mount or a FUSE daemon being restarted answers EIO for a while; on a local disk
# it is a hardware error that stays, and then the budget runs out and the error is raised.
# ENOENT, EACCES, EROFS, ENOSPC, EDQUOT are never retried: they do not heal by waiting.
TRANSIENT_ERRNOS = frozenset(
    {
        errno.EIO,
        errno.ESTALE,  # NFS handle invalidated by a server failover; a new lookup succeeds
        errno.ENOTCONN,  # FUSE / GlusterFS / sshfs: "transport endpoint is not connected"
        errno.ETIMEDOUT,  # NFS soft mount or CIFS timing out
        errno.EHOSTDOWN,
        errno.EHOSTUNREACH,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
    }
)


def transient_os_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` whose errno is in ``TRANSIENT_ERRNOS``, or a
    ``shutil.Error`` (``copytree`` collects its per-file errors as text) whose every error is."""
    if isinstance(exc, shutil.Error):
        entries = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        codes = [_ERRNO_TEXT.search(str(entry[-1])) for entry in entries if entry]
        return bool(codes) and all(m and int(m.group(1)) in TRANSIENT_ERRNOS for m in codes)
    return isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS


_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\]")


def storage_retry_seconds() -> float:
    """``HEADWAY_STORAGE_RETRY_SECONDS`` (default 90; ``0`` turns retries off): how long one
    checkpoint upload or download keeps retrying a transient storage failure.

    Raises:
        ValueError: naming the variable when it is not a finite number >= 0.
    """
    raw = os.environ.get("HEADWAY_STORAGE_RETRY_SECONDS", "")
    if not raw.strip():
        return DEFAULT_RETRY_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(
            f"HEADWAY_STORAGE_RETRY_SECONDS must be a number of seconds >= 0, got {raw!r}"
        )
    return value


def retry_transient(
    what: str,
    call: Callable[[], T],
    is_transient: Callable[[BaseException], bool],
    *,
    budget_s: float | None = None,
) -> T:
    """Return ``call()``, calling it again after a transient failure until ``budget_s`` seconds
    (default ``storage_retry_seconds()``) have passed since the first failure.

    ``call`` must be safe to repeat: it redoes the whole transfer to the same place (same
    keys, same files), so a retry overwrites what a failed attempt left, never adds to it.
    Waits 0.5 s, then doubles, at most 10 s apart, and never sleeps past the budget.

    Arguments:
        what (str): named in the log lines, e.g. ``"upload of checkpoint 6f1c..."``.
        is_transient: True for an error worth retrying.

    Raises:
        The error of the last attempt: at once when it is not transient, else once the budget
        is spent.
    """
    budget = storage_retry_seconds() if budget_s is None else budget_s
    delay = FIRST_DELAY_S
    attempt = 1
    first_failure: float | None = None
    while True:
        try:
            result = call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            left = budget - (now - first_failure)
            if left <= 0:
                logger.error(
                    "storage: %s failed %d times over %.0f s (HEADWAY_STORAGE_RETRY_SECONDS="
                    "%g); giving up: %s",
                    what,
                    attempt,
                    now - first_failure,
                    budget,
                    exc,
                )
                raise
            wait = min(delay, left)
            logger.warning(
                "storage: %s failed (attempt %d: %s: %s); retrying in %.1f s",
                what,
                attempt,
                type(exc).__name__,
                exc,
                wait,
            )
            time.sleep(wait)
            delay = min(delay * 2, MAX_DELAY_S)
            attempt += 1
            continue
        if attempt > 1:
            logger.warning("storage: %s succeeded at attempt %d", what, attempt)
        return result
