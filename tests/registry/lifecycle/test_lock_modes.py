"""The lifecycle's row locks leave rows that reference the locked one insertable.

A log batch marks the lines it stores on its run (an UPDATE of the run row) and then inserts
them (rows whose foreign key takes KEY SHARE on the trial). A pause locks the trial and then
waits for that run. With ``FOR UPDATE`` on the trial the log batch's insert waited for the pause
and PostgreSQL broke the cycle with "deadlock detected" (a 503 to the pausing user); with
``FOR NO KEY UPDATE`` (the lock an UPDATE of non-key columns takes) the insert goes through,
the batch commits and the pause follows.
"""

from __future__ import annotations

import queue
import threading

import pytest
from django.db import connection, transaction
from django.db.models import F

from registry import lifecycle
from registry.models import State, TrialLog, TrialRun
from tests.helpers import queued_experiment, reload, start_run, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
"""


def _waits_for_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def test_a_log_batch_holding_the_run_does_not_deadlock_with_a_pause(django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("row lock modes are PostgreSQL's (SQLite has one writer)")
    owner = django_user_model.objects.create_user("lock-modes")
    trial = queued_experiment(owner, CONFIG).trials.get()
    run = start_run(reload(trial))
    pause_pid: queue.Queue[int] = queue.Queue()
    errors: list[str] = []

    def pause() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pause_pid.put(cursor.fetchone()[0])
            lifecycle.trial_pause(trial_id=trial.id)
        except Exception as exc:  # what the view answers 503 for
            errors.append(f"pause: {exc!r}")
        finally:
            connection.close()

    def log_batch() -> None:
        pauser = threading.Thread(target=pause)
        try:
            with transaction.atomic():
                # As the log store marks the lines it takes on the run, then inserts them.
                TrialRun.objects.filter(pk=run.pk).update(log_position=F("log_position") + 1)
                pauser.start()
                pid = pause_pid.get(timeout=60)
                wait_for(lambda: _waits_for_a_lock(pid), 60, "the pause to wait for the run")
                TrialLog.objects.create(trial_id=trial.id, run_id=run.run_id, message="a line")
        except Exception as exc:
            errors.append(f"log batch: {exc!r}")
        finally:
            pauser.join()
            connection.close()

    batch = threading.Thread(target=log_batch)
    batch.start()
    batch.join()

    assert errors == []
    assert reload(trial).state == State.PAUSED
    assert TrialRun.objects.get(pk=run.pk).stop_requested == "pause"
    assert list(TrialLog.objects.filter(trial_id=trial.id).values_list("message", flat=True)) == [
        "a line"
    ]
