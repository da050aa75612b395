"""Celery tasks. Each is a thin entry point over a service in ``workers.runner``."""

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down


@shared_task(
    name="headway.run_trial",
    acks_late=True,  # a worker lost mid-run leaves the message to be redelivered
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_trial(trial_id: int, run_id: int) -> None:
    """Run one trial run. Idempotent: the claim in ``trial_run_claim`` lets only one worker in."""
    from workers.runner import run_trial as run

    run(trial_id, run_id)


@shared_task(
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


@shared_task(name="headway.reap_lost_runs", ignore_result=True, expires=60)
def reap_lost_runs() -> None:
    """Re-queue trials whose lease expired (not counted as restarts), place queued runs, and send again the
    tasks of placed runs no worker claimed (sent every ``HEADWAY_REAPER_INTERVAL_SECONDS`` by
    Celery beat)."""
    from datetime import timedelta

    from django.conf import settings

    from registry import lifecycle
    from registry.scheduling import place_queued_runs, redispatch_unclaimed_runs

    lifecycle.reap_lost_runs()  # runs and shares whose lease expired plus its margin
    place_queued_runs()  # also a periodic safety net for passes that failed
    # Placed runs whose task message was lost (no worker claimed them).
    redispatch_unclaimed_runs(timeout=timedelta(seconds=settings.HEADWAY_DISPATCH_TIMEOUT_SECONDS))


@shared_task(
    name="headway.checkpoint_gc",
    acks_late=True,  # idempotent: claims are conditional UPDATEs, storage deletes are repeatable
    reject_on_worker_lost=True,
    ignore_result=True,
)
def checkpoint_gc(experiment_id: int, orphans: bool = True) -> None:
    """One checkpoint GC pass over an experiment: retention, retries and (with ``orphans``)
    orphaned files (``registry.lifecycle.checkpoint_gc``)."""
    from registry.lifecycle import checkpoint_gc as run

    run(experiment_id=experiment_id, orphans=orphans)


@shared_task(
    name="headway.experiment_delete",
    acks_late=True,  # idempotent: acts only on a DELETING experiment
    reject_on_worker_lost=True,
    ignore_result=True,
)
def experiment_delete(experiment_id: int) -> None:
    """Delete a DELETING experiment's stored checkpoints, then its rows
    (``registry.lifecycle.experiment_delete_run``)."""
    from registry.lifecycle import experiment_delete_run

    experiment_delete_run(experiment_id=experiment_id)


@worker_ready.connect
def register_host(sender=None, **kwargs) -> None:
    """Register this worker's host and heartbeat it (``workers.hosts``); ``sender`` is the
    worker's consumer."""
    from workers import hosts

    hosts.start(consumer=sender)


@worker_shutting_down.connect
def preempt_running_trials(**kwargs) -> None:
    """Warm shutdown: running trials checkpoint and stop, and are re-queued to resume elsewhere.

    The host is marked stopped first, so the re-queued runs are not placed back on it.
    """
    from django.conf import settings

    from workers import hosts, supervision

    hosts.stop()
    supervision.preempt_all_runs(grace=settings.HEADWAY_KILL_GRACE_SECONDS)
