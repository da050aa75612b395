"""The registry sends Celery tasks through ``celery.current_app``: in every thread of a
process that loaded Django's settings (gunicorn's gthread workers, the test live server), that is
the app of ``config.celery``, configured from the settings, never Celery's unconfigured fallback."""

from __future__ import annotations

import threading

from celery import current_app
from django.conf import settings

from config.celery import app


def _current_in_a_new_thread() -> object:
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(current_app._get_current_object()))
    thread.start()
    thread.join()
    return seen[0]


def test_it_is_the_configured_app_in_this_and_other_threads() -> None:
    assert current_app._get_current_object() is app
    # Celery's Django fix-up makes it the default app, which threads without their own use.
    assert _current_in_a_new_thread() is app
    assert current_app.conf.task_default_queue == settings.CELERY_TASK_DEFAULT_QUEUE
