"""The Celery app, wired as in Celery's "First steps with Django" guide."""

import os
from typing import Any

from celery import Celery

from workers.broker import celery_broker_settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("headway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["registry", "webhooks"])


@app.on_after_configure.connect
def ride_out_broker_outages(sender: Celery, **kwargs: Any) -> None:
    """Reconnect forever and keep running tasks through a broker outage, as the host agents
    do (``workers.broker``); set once Django's ``CELERY_*`` settings are read."""
    url, options = str(sender.conf.broker_url or ""), sender.conf.broker_transport_options
    sender.conf.update(celery_broker_settings(url, options))
