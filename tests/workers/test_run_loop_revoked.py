"""A host token revoked while a trial runs: the run loop's next call is refused (401), and the
loop stops the process itself instead of abandoning it (``workers.run_loop``).

``run_trial`` runs in the test's thread as the ``host_agent`` fixture's host (tests/plugin_processes.py);
no lease watchdog runs here, so what stops the process is the run loop alone.
"""

from __future__ import annotations

import os
import signal

import pytest

from registry.lifecycle.host_tokens import host_token_revoke
from registry.models import RunState, TrialRun
from tests.helpers import make_tar_gz
from tests.helpers_agent import configure_agent, log_lines, trial_on_agent
from workers import leases, runner, supervision

pytestmark = pytest.mark.usefixtures("fresh_supervision")


def test_a_refused_call_stops_the_process_and_leaves_the_exit_to_the_reaper(
    host_agent, django_user_model, monkeypatch
):
    configure_agent(HEADWAY_KILL_GRACE_SECONDS=600.0)  # SIGTERM is enough
    monkeypatch.setattr(leases, "_held", {})
    owner = django_user_model.objects.create_user("revoked-owner")
    source = {
        "entrypoint": "echo started; sleep 300",
        "searcher": {"name": "single", "metric": "loss", "max_length": 5},
        "max_restarts": 0,
    }
    trial = trial_on_agent(host_agent, owner, source, make_tar_gz({"empty.txt": ""}))
    seen: dict = {}
    register = supervision.register

    def register_then_revoke(trial_id, run_id, killer, node_rank=0):
        register(trial_id, run_id, killer, node_rank)
        seen["killer"], (seen["lease"],) = killer, leases.held()
        host_token_revoke(host_agent.name)  # the next log flush or heartbeat gets 401

    monkeypatch.setattr(supervision, "register", register_then_revoke)
    try:
        assert runner.run_trial(trial.id, 1) is None  # stopped by this host: not its code
        assert seen["killer"].process.returncode == -signal.SIGTERM  # ended, not left running
    finally:
        if "killer" in seen and seen["killer"].process.poll() is None:
            os.killpg(seen["killer"].process.pid, signal.SIGKILL)
    assert seen["lease"].expired.startswith(f"the master refused host {host_agent.name}'s token")
    # Neither the exit nor the last lines could be sent: the run is left to the lost-run reaper.
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert run.state == RunState.RUNNING and run.exit_code is None
    assert not [line for line in log_lines(trial) if "exited with code" in line]
