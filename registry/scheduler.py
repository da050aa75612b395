"""Puts runnable trials on the Celery queue.

Every launch of a trial is a ``TrialRun`` row with its own number and token; the task is sent
only after the transaction that created the row commits (never enqueue inside an open
transaction: the worker could look for a row that is not there yet).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from registry.models import RunState, Trial, TrialRun

RUN_TRIAL_TASK = "headway.run_trial"


def _send_run_task(trial_id: int, run_id: int) -> None:
    # By name, so the registry does not import the workers app; the queue is read per call so
    # tests (and multi-tenant setups) can point runs at their own worker.
    from config.celery import app

    app.send_task(RUN_TRIAL_TASK, args=[trial_id, run_id], queue=settings.CELERY_TASK_DEFAULT_QUEUE)


def schedule_run(trial: Trial) -> TrialRun:
    """Create the trial's next run (QUEUED) and enqueue it once the transaction commits.

    The caller holds the trial row lock (``select_for_update``) so two callers cannot both
    create run N+1; the unique (trial, run_id) constraint backs that up.
    """
    trial.run_id += 1
    trial.save(update_fields=["run_id"])
    run = TrialRun.objects.create(trial=trial, run_id=trial.run_id, state=RunState.QUEUED)
    trial_id, run_id = trial.id, run.run_id
    transaction.on_commit(lambda: _send_run_task(trial_id, run_id))
    return run
