"""The master's Celery tasks: the lost-run reaper, checkpoint GC, the orphan sweep and experiment
deletion.

They run in the master's worker (``celery -A config worker -Q <HEADWAY_QUEUE> -B``), which
opens the database; worker hosts run ``workers`` (the host agent), which never does.
"""

from celery import shared_task


@shared_task(name="headway.reap_lost_runs", ignore_result=True, expires=60)
def reap_lost_runs() -> None:
    """Re-queue trials whose lease expired (not counted as restarts), place queued runs, and
    send again the tasks of placed runs no worker claimed (sent every
    ``HEADWAY_REAPER_INTERVAL_SECONDS`` by Celery beat)."""
    from registry.health import record_beat
    from registry.lifecycle._standin import reaper_pass

    reaper_pass()
    # A completed pass is the master worker's beat (GET /api/v1/health/, registry/health.py):
    # its age covers the beat scheduler, the broker hop and the worker together.
    record_beat()


@shared_task(name="headway.pool_poll", ignore_result=True, expires=60)
def pool_poll(pool_type: str) -> list[int]:
    """One poll of the pools of type ``pool_type`` (``registry.pools.poll_pools``: its
    provider reconciles its runs, then submits the queued ones); sent by Celery beat at the
    type's own interval (``PoolProvider.poll_seconds``; ``registry.pools.add_poll_entries``), a
    no-op without a pool of that type. Returns what the provider submitted.

    Raises:
        KeyError: no pool type ``pool_type``.
    """
    from registry import lifecycle
    from registry.pools import poll_pools

    return poll_pools(pool_type, run_exited=lifecycle.trial_run_exited)


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


@shared_task(name="headway.checkpoint_orphan_sweep", ignore_result=True)
def checkpoint_orphan_sweep() -> None:
    """Delete orphaned checkpoint files (uploaded, never registered) in every storage place
    (``registry.lifecycle.checkpoint_orphan_sweep``; every
    ``HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS`` by Celery beat). Not redelivered after a lost
    worker: the next pass does the same work."""
    from registry.lifecycle import checkpoint_orphan_sweep as run

    run()


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


@shared_task(
    name="headway.hparam_importance",
    # Not redelivered after a lost worker: the fit's row is then re-queued by the next request
    # once it counts as lost (registry.hparam_importance.LOST_AFTER_LIMITS).
    acks_late=False,
    ignore_result=True,
)
def hparam_importance(fit_id: int) -> None:
    """Fit one queued hyperparameter importance (``registry.hparam_importance.run_fit``)."""
    from registry.hparam_importance import run_fit

    run_fit(fit_id)
