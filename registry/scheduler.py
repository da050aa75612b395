"""Queues trial runs and asks for them to be placed on worker hosts.

Every launch of a trial is a ``TrialRun`` row with its own number and token. ``schedule_run``
creates it QUEUED; once the transaction commits, a placement pass (``registry.scheduling``)
gives it a host with free slots and devices and sends the Celery task to that host's queue.
Nothing is enqueued inside an open transaction: the worker could look for a row that is not
there yet, and a test's transaction (which never commits) never dispatches anything.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from registry.errors import StoredConfigInvalid
from registry.models import Experiment, RunState, Trial, TrialRun

RUN_TRIAL_TASK = "headway.run_trial"
RUN_SHARE_TASK = "headway.run_trial_share"


def send_run_task(trial_id: int, run_id: int, queue: str) -> None:
    """Send ``headway.run_trial(trial_id, run_id)`` to the Celery ``queue`` (a host's queue).

    By task name, so the registry does not import the workers app. Sending twice is harmless:
    the worker's claim (a conditional UPDATE) lets one delivery in.
    """
    from celery import current_app as app

    app.send_task(RUN_TRIAL_TASK, args=[trial_id, run_id], queue=queue)


def send_share_task(trial_id: int, run_id: int, node_rank: int, queue: str) -> None:
    """Send ``headway.run_trial_share(trial_id, run_id, node_rank)`` to a host's ``queue``: that
    host's part of a run ganged over several hosts (``registry.models.RunShare``). Sending twice
    is harmless (the share's claim lets one delivery in)."""
    from celery import current_app as app

    app.send_task(RUN_SHARE_TASK, args=[trial_id, run_id, node_rank], queue=queue)


def _place_after_commit() -> None:
    # Imported here: registry.scheduling uses the lifecycle helpers, whose modules import this one.
    from registry.scheduling import place_queued_runs

    place_queued_runs()


def request_placement() -> None:
    """Run a placement pass once the current transaction commits (at once outside one).

    ``robust``: a failed pass (broker or database down) is logged, not raised into the request
    or task whose transaction already committed; the next heartbeat or reaper pass retries.
    """
    transaction.on_commit(_place_after_commit, robust=True)


def schedule_run(trial: Trial) -> TrialRun:
    """Create the trial's next run (QUEUED, no host yet) and request a placement on commit.

    The caller holds the trial row lock (``select_for_update``) so two callers cannot both
    create run N+1; the unique (trial, run_id) constraint backs that up. The run belongs to the
    experiment's resource pool (``resources.resource_pool``) and to this registry's namespace
    (``HEADWAY_QUEUE``): only hosts of both will run it.
    """
    trial.run_id += 1
    trial.save(update_fields=["run_id"])
    resources, error = run_resources(trial.experiment)
    run = TrialRun.objects.create(
        trial=trial,
        run_id=trial.run_id,
        state=RunState.QUEUED,
        namespace=settings.CELERY_TASK_DEFAULT_QUEUE,
        **resources,
    )
    if error:
        # Never placed with defaults the user did not ask for: the trial says why it waits.
        Trial.objects.filter(id=trial.id).update(scheduling_message=error)
    request_placement()
    return run


def run_resources(experiment: Experiment) -> tuple[dict[str, Any], str]:
    """The placement fields of a run (``pool``, ``slots_needed``, ``priority``, ``max_slots``)
    from its experiment's validated config (``Experiment.conf``), and ``""``; or
    ``slots_needed=None`` and why the stored config no longer validates (a config stored by an
    older version: ``StoredConfigInvalid``), which the run's trial then shows as its
    ``scheduling_message``. Such a run is never placed with defaults the user did not ask for.

    Read once when the run is queued, so a placement pass never decodes configs.
    """
    try:
        resources = experiment.conf.resources
    except StoredConfigInvalid as exc:
        message = f"not placed: the experiment's stored config is invalid: {exc.first_error}"
        return {"slots_needed": None}, message[:500]
    fields = {
        "pool": resources.resource_pool,
        "slots_needed": resources.slots_per_trial,
        "priority": resources.priority,
        "max_slots": resources.max_slots,
    }
    return fields, ""
