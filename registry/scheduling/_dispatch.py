"""Sending a placed run's Celery task to its host's queue.

By task name through ``celery.current_app``, so the registry never imports the workers app.
Sending twice is harmless: the worker's claim (a conditional UPDATE) lets one delivery in.

A send never raises: it happens after the placement committed (on commit), so an error would
only turn a stored change into a 500 that a client retries (a duplicate experiment). While the
broker is away a send fails after kombu's publish retries (under a second when the broker
refuses connections) and the process skips its sends of the next
``SKIP_AFTER_FAILURE_SECONDS``; each is logged, its run stays placed and QUEUED, and the
reaper's re-dispatch (``_redispatch``) sends it again once ``HEADWAY_DISPATCH_TIMEOUT_SECONDS``
have passed without a claim.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import current_app

logger = logging.getLogger("headway.scheduler")

RUN_TRIAL_TASK = "headway.run_trial"
RUN_SHARE_TASK = "headway.run_trial_share"


# After a failed send, this process skips the sends of the next seconds: one request placing
# many trials (a grid search) would otherwise wait out kombu's retries once per trial.
SKIP_AFTER_FAILURE_SECONDS = 10.0
_skip_until = 0.0  # time.monotonic() before which sends are skipped


def _send(name: str, args: list[Any], queue: str, what: str) -> bool:
    global _skip_until
    later = "it is sent again once the broker answers (HEADWAY_DISPATCH_TIMEOUT_SECONDS)"
    if time.monotonic() < _skip_until:
        logger.warning("the task of %s was not sent to %s: the broker failed just now; %s",
                       what, queue, later)  # fmt: skip
        return False
    try:
        current_app.send_task(name, args=args, queue=queue)
    except Exception as exc:
        # Whatever the broker client raised (kombu's OperationalError, a socket error): the
        # re-dispatch retries, so this is a delay, not a failure of the request.
        _skip_until = time.monotonic() + SKIP_AFTER_FAILURE_SECONDS
        logger.warning("the task of %s could not be sent to %s (%s: %s); %s",
                       what, queue, type(exc).__name__, exc, later)  # fmt: skip
        return False
    return True


def send_run_task(trial_id: int, run_id: int, queue: str) -> bool:
    """Send ``headway.run_trial(trial_id, run_id)`` to the Celery ``queue`` (a host's queue);
    False (logged) when the broker could not take it (see module)."""
    return _send(RUN_TRIAL_TASK, [trial_id, run_id], queue, f"trial {trial_id} run {run_id}")


def send_share_task(trial_id: int, run_id: int, node_rank: int, queue: str) -> bool:
    """Send ``headway.run_trial_share(trial_id, run_id, node_rank)`` to a host's ``queue``: that
    host's part of a run ganged over several hosts (``registry.models.RunShare``); False (logged)
    when the broker could not take it (see module)."""
    what = f"trial {trial_id} run {run_id} node {node_rank}"
    return _send(RUN_SHARE_TASK, [trial_id, run_id, node_rank], queue, what)
