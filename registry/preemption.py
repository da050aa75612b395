"""Long-poll for a run's stop request, so ``should_preempt()`` learns of a pause within ~0.1 s.

The SDK's watcher thread keeps one ``GET trials/{id}/preempt/?timeout=S`` open; the server
answers as soon as the run's ``stop_requested`` is set, or ``False`` after ``S`` seconds.

A waiting request holds no database connection (the security review found that "30 preemption
long-polls left 41 idle connections"). On a server with a thread per client connection (Django's
``runserver``) each kept-alive request thread would otherwise keep its own connection open for as
long as the trial lives, and even a thread pool (gunicorn) would query once per waiter every 0.1 s.
So after one direct check, the request thread closes its connection and waits on an event; one
watcher thread per process polls every waiting run in ONE query every ``POLL_SECONDS`` over its own
connection, which it closes as soon as nobody waits. Inside a transaction (tests) and on SQLite (one
file, no connection limit; a test's in-memory database is not visible from another thread) the
request thread polls by itself, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import reduce
from operator import or_

from django.db import connection
from django.db.models import Q

from registry.models import RunState, TrialRun
from registry.overload import is_database_unavailable

logger = logging.getLogger("headway.registry")

POLL_SECONDS = 0.1

_Key = tuple[int, int]


def _answer(row: tuple[str, str] | None) -> bool | None:
    """The long-poll's answer for a ``(stop_requested, state)`` row; None: keep waiting."""
    if row is None:
        return False  # an unknown run
    if row[0] or row[1] == RunState.EXITED:
        return True  # a run that has exited (e.g. reaped as lost) must stop too
    return None


def _check(trial_id: int, run_id: int) -> bool | None:
    row = (
        TrialRun.objects.filter(trial_id=trial_id, run_id=run_id)
        .values_list("stop_requested", "state")
        .first()
    )
    return _answer(row)


class _Waiter:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.answer = False


class _StopWatcher:
    """One thread per process answering every waiting long-poll from one query per poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[_Key, list[_Waiter]] = {}
        self._running = False

    def wait(self, key: _Key, timeout: float) -> bool:
        waiter = _Waiter()
        with self._lock:
            self._waiting.setdefault(key, []).append(waiter)
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="headway-stop-watcher", daemon=True).start()
        if not waiter.event.wait(timeout):
            with self._lock:
                waiters = self._waiting.get(key, [])
                if waiter in waiters:
                    waiters.remove(waiter)
                    if not waiters:
                        del self._waiting[key]
        return waiter.answer

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    keys = list(self._waiting)
                    if not keys:
                        self._running = False
                        return
                try:
                    self._poll(keys)
                except Exception as exc:
                    if not is_database_unavailable(exc):
                        raise
                    # A database restart: its waiters keep waiting; poll on a fresh connection.
                    logger.warning("database unavailable in the stop watcher, retrying: %s", exc)
                    connection.close()
                    time.sleep(max(POLL_SECONDS, 0.5))
                    continue
                time.sleep(POLL_SECONDS)
        except Exception:
            with self._lock:
                self._running = False  # the next waiter starts a new thread
            raise
        finally:
            connection.close()  # this thread's own connection: nobody waits any more

    def _poll(self, keys: list[_Key]) -> None:
        condition = reduce(or_, (Q(trial_id=t, run_id=r) for t, r in keys))
        rows = {
            (t, r): (stop, state)
            for t, r, stop, state in TrialRun.objects.filter(condition).values_list(
                "trial_id", "run_id", "stop_requested", "state"
            )
        }
        with self._lock:
            for key in keys:
                answer = _answer(rows.get(key))
                if answer is None:
                    continue
                for waiter in self._waiting.pop(key, []):
                    waiter.answer = answer
                    waiter.event.set()


_watcher = _StopWatcher()


def wait_for_stop_request(trial_id: int, run_id: int, timeout: float) -> bool:
    """True when run ``run_id`` of the trial has a stop request, waiting up to ``timeout`` s.

    A run that has exited (e.g. reaped as lost) answers True: a process outliving its run must
    stop. An unknown run answers False.
    """
    answer = _check(trial_id, run_id)
    if answer is not None or timeout <= 0:
        return bool(answer)
    if connection.vendor != "sqlite" and not connection.in_atomic_block:
        connection.close()  # no connection held while waiting (see the module docstring)
        return _watcher.wait((trial_id, run_id), timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        answer = _check(trial_id, run_id)
        if answer is not None:
            return answer
    return False
