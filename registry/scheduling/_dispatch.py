"""Sending a placed run's Celery task to its host's queue.

By task name through ``celery.current_app``, so the registry never imports the workers app.
Sending twice is harmless: the worker's claim (a conditional UPDATE) lets one delivery in.
"""

from __future__ import annotations

from celery import current_app

RUN_TRIAL_TASK = "headway.run_trial"
RUN_SHARE_TASK = "headway.run_trial_share"


def send_run_task(trial_id: int, run_id: int, queue: str) -> None:
    """Send ``headway.run_trial(trial_id, run_id)`` to the Celery ``queue`` (a host's queue)."""
    current_app.send_task(RUN_TRIAL_TASK, args=[trial_id, run_id], queue=queue)


def send_share_task(trial_id: int, run_id: int, node_rank: int, queue: str) -> None:
    """Send ``headway.run_trial_share(trial_id, run_id, node_rank)`` to a host's ``queue``: that
    host's part of a run ganged over several hosts (``registry.models.RunShare``)."""
    current_app.send_task(RUN_SHARE_TASK, args=[trial_id, run_id, node_rank], queue=queue)
