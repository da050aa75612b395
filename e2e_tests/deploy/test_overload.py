"""Overload as back-pressure, smaller than ``bench/overload.py`` (which measures the timings):
30 trials report 10 metrics a second and heartbeat through the SDK's client while 10 dashboard
readers poll, against the real gunicorn server on a PostgreSQL server of its own with the
default ``max_connections``. No trial is stopped and no point is lost, whatever the server
answered meanwhile (a busy server answers 503 + Retry-After, which the clients honour). No
timing is asserted.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

import pytest

from bench import overload
from bench._server import Server
from tests.helpers import require

TRIALS = 30
READERS = 10
SECONDS = 20.0


@pytest.mark.integration
@pytest.mark.slow
def test_overload_stops_no_trial_and_loses_no_point():
    require(
        os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")),
        "DATABASE_URL does not name PostgreSQL",
    )
    with ExitStack() as stack:
        backend = overload.overload_backend(stack)
        token = backend.prepare("overload")
        server = stack.enter_context(Server(backend, kind="serve"))
        figures = overload.run_phase(server.url, token, "e2e", TRIALS, READERS, SECONDS)
    print(figures)
    assert figures["trials_stopped"] == 0
    assert figures["points_lost"] == 0
    assert figures["points_sent"] >= TRIALS * overload.METRICS  # every trial reported
    assert figures["heartbeats"] >= TRIALS
    assert figures["reads"] > 0
    # No 500s, and no reader lost its connection ("-1"): only answers, 503 + Retry-After at worst.
    assert not [
        s for s in figures["read_statuses"] if s == "-1" or (s.startswith("5") and s != "503")
    ]
