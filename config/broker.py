"""The Celery broker's settings: Redis when ``REDIS_URL`` is set, else kombu's filesystem
transport under the var folder (the single-machine setup needs no broker server); and the
periodic tasks the master worker's embedded beat sends."""

from pathlib import Path

from config.env import envfloat


def broker_settings(
    redis_url: str, var_dir: Path, *, visibility_timeout: int
) -> tuple[str, dict[str, object]]:
    """``(CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS)``.

    With ``redis_url``: that URL, and Redis' visibility timeout in seconds
    (``HEADWAY_VISIBILITY_TIMEOUT``, read by ``headway.cluster_settings``; default 12 h: a task
    unacknowledged that long is delivered again). Without: the filesystem transport's folders
    under ``var_dir/broker`` (made here).
    """
    if redis_url:
        return redis_url, {"visibility_timeout": visibility_timeout}
    folder = var_dir / "broker"
    for sub in ("out", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return "filesystem://", {
        "data_folder_in": str(folder / "out"),
        "data_folder_out": str(folder / "out"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }


def beat_schedule(
    queue: str, *, orphan_sweep_seconds: int, webhook_sweep_seconds: int = 30
) -> dict[str, dict[str, object]]:
    """``CELERY_BEAT_SCHEDULE``: the tasks the master worker's embedded beat (``worker -B``)
    sends to ``queue``, each with its interval in seconds.

    The lost-run reaper every ``HEADWAY_REAPER_INTERVAL_SECONDS`` (10) and the checkpoint
    orphan sweep every ``orphan_sweep_seconds``, the webhook sweep every
    ``webhook_sweep_seconds``. A send not taken within its expiry is
    dropped: the next one does the same work. The registry adds each polled pool type's
    entry when Django loads it (``registry.pools.add_poll_entries``): the settings never
    import the apps.

    Raises:
        ValueError: an interval that is not a number.
    """
    return {
        "reap-lost-runs": {
            "task": "headway.reap_lost_runs",
            "schedule": envfloat("HEADWAY_REAPER_INTERVAL_SECONDS", 10, minimum=0.1),
            "options": {"queue": queue, "expires": 60},
        },
        # Orphaned checkpoint files (uploaded, never registered: registry.lifecycle._orphans).
        "checkpoint-orphan-sweep": {
            "task": "headway.checkpoint_orphan_sweep",
            "schedule": float(orphan_sweep_seconds),
            "options": {"queue": queue, "expires": orphan_sweep_seconds},
        },
        # Webhook deliveries whose task was lost, or whose worker died (webhooks.delivery.sweep).
        "webhook-sweep": {
            "task": "headway.webhook_sweep",
            "schedule": float(webhook_sweep_seconds),
            "options": {"queue": queue, "expires": webhook_sweep_seconds},
        },
    }
