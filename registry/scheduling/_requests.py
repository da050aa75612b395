"""Queue changes that ask for a placement pass once their transaction commits.

Nothing is enqueued inside an open transaction: a worker could look for a row that is not
there yet, and a test's transaction (which never commits) never dispatches anything.
"""

from __future__ import annotations

from django.db import transaction

from registry.models import Trial, TrialRun
from registry.scheduling._placement import place_queued_runs
from registry.scheduling._queue import close_queued_run, queue_run


def request_placement(namespace: str | None = None, *, wait: bool = True) -> None:
    """Run a placement pass of ``namespace`` (default this registry's) once the current
    transaction commits (at once outside one). A change to a run passes the run's namespace, a
    host's change (a heartbeat that adds capacity: ``host_agent.host_beat``) its host's: the
    pass is the one whose queue or slots changed, whatever the serving process is set to.
    ``wait=False`` (heartbeats, exits): never wait for a running pass (``place_queued_runs``).

    ``robust``: a failed pass (broker or database down) is logged, not raised into the request
    or task whose transaction already committed; the next request's pass or the reaper's
    periodic pass retries.
    """

    def placement_pass() -> None:
        # A function, not a functools.partial: Django's robust on_commit names the failed
        # callback by its __qualname__, and a partial's lack of one turned the logged failure
        # into an AttributeError raised into the request (a 500 after the commit).
        place_queued_runs(wait=wait, namespace=namespace)

    transaction.on_commit(placement_pass, robust=True)


def schedule_run(trial: Trial) -> TrialRun:
    """Create the trial's next run (QUEUED, no host; ``_queue.queue_run``: the caller holds the
    trial row lock) and request a placement pass on commit."""
    run = queue_run(trial)
    request_placement(run.namespace)
    return run


def drop_queued_run(run: TrialRun) -> None:
    """Close a run no worker claimed yet (``_queue.close_queued_run``); when it was placed, its
    slots are free on commit, so a pass is requested then."""
    close_queued_run(run)
    if run.host_id is not None:
        request_placement(run.namespace)
