"""Deliver queued metric reports when the trial process is asked to stop with SIGTERM.

A host agent stops a trial by sending SIGTERM to its process group, then SIGKILL
``HEADWAY_KILL_GRACE_SECONDS`` (default 10) later. Python's default SIGTERM action ends the
process at once, without ``atexit``: the reports still queued for the background reporter were
lost (docs/decisions/metrics.md). This handler flushes them first, then ends the process the
way SIGTERM would have (killed by signal 15), so the worker and the lifecycle see no difference.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import types
from collections.abc import Callable

logger = logging.getLogger("headway.core")

FLUSH_TIMEOUT_S = 5.0  # half the agent's default kill grace: SIGKILL must not come first


def install_flush_on_sigterm(flush: Callable[[float], bool]) -> Callable[[], None]:
    """Have SIGTERM call ``flush(FLUSH_TIMEOUT_S)`` before the process ends; return a function
    that restores the default action.

    Installed only from the main thread and only over the default action: a script (or library)
    that handles SIGTERM itself keeps its own handler, and should flush there
    (``core_context.train.flush()``). SIGKILL cannot be caught: validation reports are sent
    synchronously for that reason (``TrainContext.report_validation_metrics``).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def on_sigterm(signum: int, frame: types.FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
        try:
            if not flush(FLUSH_TIMEOUT_S):
                logger.warning("SIGTERM: queued metrics not delivered in %g s", FLUSH_TIMEOUT_S)
        except Exception:
            logger.exception("SIGTERM: while delivering queued metrics")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)

    def uninstall() -> None:
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return uninstall
