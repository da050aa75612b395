"""Running a hook as the interpreter exits, before it joins any thread (``TorchTrainer``'s
clean-up of a driver that never called ``shutdown()``)."""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 - its exit hook registers before ours (see below)
import threading
from collections.abc import Callable


def at_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` when the interpreter exits, before it joins any thread.

    ``atexit`` is too late: the interpreter first joins its threads, and the elastic agent tails
    the workers' output in ``concurrent.futures`` threads, which that exit joins too (its own
    hook, registered with ``threading._register_atexit``) and which run as long as the workers
    do. So the exit of a driver that never called ``shutdown()`` waited forever. Hooks of
    ``threading._register_atexit`` run in reverse order before that join; ours is registered
    after ``concurrent.futures.thread``'s (imported above), so it runs first.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # a Python without it: best effort
        atexit.register(hook)
        return
    try:
        register(hook)
    except RuntimeError:  # the interpreter is already shutting down
        atexit.register(hook)
