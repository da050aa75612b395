"""The host agent's Celery tasks and signals, each a thin entry point over ``workers.runner``
and ``workers.hosts``. The master sends the tasks by name (``registry.scheduling._dispatch``)."""

from typing import Any

from celery.signals import worker_ready, worker_shutting_down

from workers.celery import app


@app.task(
    name="headway.run_trial",
    acks_late=True,  # a worker lost mid-run leaves the message to be redelivered
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_trial(trial_id: int, run_id: int) -> None:
    """Run one trial run. Idempotent: the master's claim lets only one worker in."""
    from workers.runner import run_trial as run

    run(trial_id, run_id)


@app.task(
    name="headway.run_trial_share",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_trial_share(trial_id: int, run_id: int, node_rank: int) -> None:
    """Run this host's part (``node_rank`` >= 1) of a run over several hosts. Idempotent: the
    share's claim lets only one worker in."""
    from workers.runner import run_trial_share as run

    run(trial_id, run_id, node_rank)


@worker_ready.connect
def register_host(sender: Any = None, **kwargs: Any) -> None:
    """Register this worker's host with the master and heartbeat it (``workers.hosts``);
    ``sender`` is the worker's consumer."""
    from workers import hosts

    hosts.start(consumer=sender)


@worker_shutting_down.connect
def preempt_running_trials(**kwargs: Any) -> None:
    """Warm shutdown: running trials checkpoint and stop, and are re-queued to resume elsewhere.

    The host is marked stopped first, so the re-queued runs are not placed back on it.
    """
    from workers import hosts, supervision
    from workers.config import settings

    hosts.stop()
    supervision.preempt_all_runs(grace=settings.HEADWAY_KILL_GRACE_SECONDS)
