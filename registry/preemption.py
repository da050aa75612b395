"""Long-poll for a run's stop request, so ``should_preempt()`` learns of a pause within ~0.1 s.

The SDK's watcher thread keeps one ``GET trials/{id}/preempt/?timeout=S`` open; the server
answers as soon as the run's ``stop_requested`` is set, or ``False`` after ``S`` seconds.
"""

from __future__ import annotations

import time

from registry.models import RunState, TrialRun

POLL_SECONDS = 0.1


def wait_for_stop_request(trial_id: int, run_id: int, timeout: float) -> bool:
    """True when run ``run_id`` of the trial has a stop request, waiting up to ``timeout`` s.

    A run that has exited (e.g. reaped as lost) answers True: a process outliving its run must
    stop. An unknown run answers False.
    """
    deadline = time.monotonic() + timeout
    while True:
        row = (
            TrialRun.objects.filter(trial_id=trial_id, run_id=run_id)
            .values_list("stop_requested", "state")
            .first()
        )
        if row is None:
            return False
        if row[0] or row[1] == RunState.EXITED:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
