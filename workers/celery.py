"""The host agent's Celery app: ``celery -A workers worker -Q <HEADWAY_QUEUE>.host.<name>``.

No Django: the broker comes from ``HEADWAY_BROKER_URL`` (or ``REDIS_URL``; unset, the
filesystem transport under ``HEADWAY_VAR_DIR/broker``, the embedded single-machine setup, the
same folders as the master's), the rest from ``workers.config``. The task settings match the
master's app (``config/settings.py``: late acks, one message prefetched, results ignored), so
a run's message is redelivered when its worker dies, and claimed by one worker only.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from workers.broker import celery_broker_settings
from workers.config import settings


def broker_options() -> tuple[str, dict[str, Any]]:
    """The broker URL and transport options of this host (see module)."""
    if settings.BROKER_URL:
        return settings.BROKER_URL, {"visibility_timeout": settings.HEADWAY_VISIBILITY_TIMEOUT}
    folder = settings.VAR_DIR / "broker"
    for sub in ("out", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return "filesystem://", {
        "data_folder_in": str(folder / "out"),
        "data_folder_out": str(folder / "out"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }


_broker, _options = broker_options()
# No fixups: Celery's Django fixup would import Django and run django.setup() in the agent
# whenever DJANGO_SETTINGS_MODULE is in its environment (as under manage.py serve or worker).
# set_as_current=False: a process that imports this module beside the master's app (a test,
# a tool) keeps sending the master's tasks through the master's app.
app = Celery(
    "headway-agent", broker=_broker, include=["workers.tasks"], fixups=[], set_as_current=False
)
app.conf.update(
    # Reconnect forever, keep running trials through a broker outage (workers.broker).
    **celery_broker_settings(_broker, _options),
    task_default_queue=settings.HEADWAY_QUEUE,
    task_ignore_result=True,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=True,
)
