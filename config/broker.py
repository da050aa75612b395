"""The Celery broker's settings: Redis when ``REDIS_URL`` is set, else kombu's filesystem
transport under the var folder (the single-machine setup needs no broker server)."""

from pathlib import Path

from config.env import envint


def broker_settings(redis_url: str, var_dir: Path) -> tuple[str, dict[str, object]]:
    """``(CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS)``.

    With ``redis_url``: that URL, and Redis' visibility timeout (``HEADWAY_VISIBILITY_TIMEOUT``,
    default 12 h: a task unacknowledged that long is delivered again). Without: the filesystem
    transport's folders under ``var_dir/broker`` (made here).

    Raises:
        ImproperlyConfigured: ``HEADWAY_VISIBILITY_TIMEOUT`` is not an integer.
    """
    if redis_url:
        return redis_url, {"visibility_timeout": envint("HEADWAY_VISIBILITY_TIMEOUT", 43200)}
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
