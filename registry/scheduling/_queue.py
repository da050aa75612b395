"""The queue's rows: a trial's next run created QUEUED, and a queued run closed.

Every launch of a trial is a ``TrialRun`` row with its own number and token. These functions
only write rows; asking for a placement pass once they commit is ``_requests.py``'s job, so the
pass itself (``_snapshot.py`` re-queues runs stranded on gone hosts) can use them too.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone

from registry.errors import StoredConfigInvalid
from registry.models import Experiment, RunState, Trial, TrialRun


def queue_run(trial: Trial) -> TrialRun:
    """Create the trial's next run, QUEUED with no host; request no placement pass.

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
    return run


def close_queued_run(run: TrialRun) -> None:
    """Close a run no worker claimed yet (EXITED now): its task will find nothing to claim, and
    the slots it was placed on are free once this commits."""
    run.state = RunState.EXITED
    run.ended_at = timezone.now()
    run.save(update_fields=["state", "ended_at"])


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
