"""Celery tasks. Each is a thin entry point over a service in ``workers.runner``."""

from celery import shared_task
from celery.signals import worker_shutting_down


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


@shared_task(name="headway.reap_lost_runs", ignore_result=True, expires=60)
def reap_lost_runs() -> None:
    """Re-queue trials whose worker stopped heartbeating (sent every 30 s by Celery beat)."""
    from datetime import timedelta

    from django.conf import settings

    from registry import lifecycle

    lifecycle.reap_lost_runs(timeout=timedelta(seconds=settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS))


@worker_shutting_down.connect
def preempt_running_trials(**kwargs) -> None:
    """Warm shutdown: running trials checkpoint and stop, and are re-queued to resume elsewhere."""
    from django.conf import settings

    from workers import supervision

    supervision.preempt_all_runs(grace=settings.HEADWAY_KILL_GRACE_SECONDS)
