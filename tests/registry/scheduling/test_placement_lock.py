"""Heartbeats never wait for the placement lock, and a request made during a pass is not lost
(``registry.scheduling._lock``). Real PostgreSQL: the lock is an advisory lock, held here from
another connection or by a pass running in another thread.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection

from registry import scheduling
from registry.scheduling import _lock, _placement
from tests.helpers import TINY_MODEL, register_host, reload, require

pytestmark = pytest.mark.django_db(transaction=True)
# A call that would wait for the lock would hang: give up long after any normal return.
HANG_S = 120


@pytest.fixture(autouse=True)
def _postgresql():
    require(connection.vendor == "postgresql", "the placement lock is PostgreSQL's")


@pytest.fixture
def trial(django_user_model):
    from registry import lifecycle

    owner = django_user_model.objects.create_user("lock-owner")
    config = {
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 10},
    }
    experiment = lifecycle.experiment_create(
        owner=owner, config_source=config, model_definition=TINY_MODEL
    )
    return experiment.trials.get()  # committed; its pass found no host


def run_in_thread(target) -> tuple[threading.Thread, list]:
    out: list = []

    def body() -> None:
        try:
            out.append(target())
        finally:
            connection.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


def test_a_heartbeat_returns_while_another_connection_holds_the_lock(trial):
    params = connection.get_connection_params()
    dsn = {k: v for k, v in params.items() if k in ("dbname", "user", "host", "port", "password")}
    with psycopg.connect(**dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", _lock.lock_key())

        def heartbeat() -> list:
            register_host("a", 1)
            return scheduling.place_queued_runs(wait=False)

        thread, out = run_in_thread(heartbeat)
        thread.join(HANG_S)
        assert not thread.is_alive(), "the heartbeat waited for the placement lock"
        assert out == [[]]  # it left the pass to the holder
        other.execute("SELECT pg_advisory_unlock(%s, %s)", _lock.lock_key())
    assert scheduling.place_queued_runs() == [(trial.id, 1)]


def test_another_namespaces_pass_neither_blocks_nor_stands_in_for_this_one(trial):
    # Two registries on one database (the suite's clusters beside its unit tests): a pass of
    # another namespace holds its own lock, so this namespace's pass neither waits for it nor
    # takes it for the pass that serves this namespace's request.
    register_host("a", 1)
    params = connection.get_connection_params()
    dsn = {k: v for k, v in params.items() if k in ("dbname", "user", "host", "port", "password")}
    this = _lock.lock_key()
    other_key = [this[0], this[1] + 1 if this[1] < 2**31 - 1 else this[1] - 1]
    with psycopg.connect(**dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", other_key)
        thread, out = run_in_thread(scheduling.place_queued_runs)
        thread.join(HANG_S)
        assert not thread.is_alive(), "the pass waited for another namespace's lock"
        assert out == [[(trial.id, 1)]]
        other.execute("SELECT pg_advisory_unlock(%s, %s)", other_key)


def test_a_request_made_during_a_pass_makes_that_pass_run_again(trial, monkeypatch, settings):
    first_pass_done = threading.Event()
    heartbeat_done = threading.Event()
    real = _placement._place
    calls: list[int] = []
    mine = settings.CELERY_TASK_DEFAULT_QUEUE

    def place_then_hold(namespace, now):
        if namespace != mine:  # a pass a session cluster's host beat asked for, meanwhile
            return real(namespace, now)
        placed = real(namespace, now)
        calls.append(len(placed))
        if len(calls) == 1:  # the first pass found no host; hold the lock a while
            first_pass_done.set()
            assert heartbeat_done.wait(HANG_S)
        return placed

    monkeypatch.setattr(_placement, "_place", place_then_hold)
    thread, out = run_in_thread(lambda: scheduling.place_queued_runs())
    assert first_pass_done.wait(HANG_S)
    register_host("a", 1)  # a host registers while the pass holds the lock
    assert scheduling.place_queued_runs(wait=False) == []  # returns at once
    assert calls == [0]  # and ran nothing itself
    heartbeat_done.set()
    thread.join(HANG_S)
    assert not thread.is_alive()
    # The pass that held the lock saw the request and ran again: the run is placed.
    assert out == [[(trial.id, 1)]] and calls == [0, 1]
    assert reload(trial).scheduling_message == ""


def test_the_first_request_a_database_ever_gets_is_seen(trial):
    # A fresh sequence reads last_value 1 before its first nextval and after it: a pass that
    # compared last_value alone missed the first request (the test above failed when it ran
    # first in a fresh test database).
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER SEQUENCE {_lock.REQUESTS_SEQUENCE} RESTART")
    before = _lock._requests()
    register_host("a", 1)
    assert scheduling.place_queued_runs(wait=False) == [(trial.id, 1)]  # one nextval
    assert _lock._requests() != before


def test_a_pass_releases_its_own_lock_when_the_namespace_setting_changes_meanwhile(
    trial, monkeypatch, settings
):
    # A test's settings (or a reload) can change HEADWAY_QUEUE while a live server's pass
    # runs: the unlock must be the lock's own key, or that session keeps the lock and every
    # later pass of the namespace that waits for it hangs.
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE
    place = _placement._place

    def changing(*args, **kwargs):
        settings.CELERY_TASK_DEFAULT_QUEUE = f"{namespace}-other"
        return place(*args, **kwargs)

    monkeypatch.setattr(_placement, "_place", changing)
    register_host("a", 1)
    assert scheduling.place_queued_runs() == [(trial.id, 1)]
    params = connection.get_connection_params()
    dsn = {k: v for k, v in params.items() if k in ("dbname", "user", "host", "port", "password")}
    with psycopg.connect(**dsn, autocommit=True) as other:
        (free,) = other.execute(
            "SELECT pg_try_advisory_lock(%s, %s)", _lock.lock_key(namespace)
        ).fetchone()
        assert free, "the pass kept its namespace's placement lock"
        other.execute("SELECT pg_advisory_unlock(%s, %s)", _lock.lock_key(namespace))
