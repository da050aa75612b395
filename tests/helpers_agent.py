"""Helpers of the in-process host agent tests: runs placed on the ``host_agent`` fixture's host
(tests/plugin_processes.py), the agent's timing for them, and the trial logs they wrote.

``workers.runner.run_trial`` then runs in the test's thread and talks to the live server over
REST with the agent's host token, as a host agent's Celery task would.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

# The agent's timing in these tests: lines sent within 0.05 s, no heartbeat unless a test asks
# for one (HEADWAY_STOP_POLL_SECONDS too: a kill request is learnt from a heartbeat's answer),
# SIGKILL 0.5 s after SIGTERM, no thread limits.
AGENT_TIMING: dict[str, Any] = {
    "HEADWAY_LOG_FLUSH_SECONDS": 0.05,
    "HEADWAY_HEARTBEAT_SECONDS": 3600.0,
    "HEADWAY_STOP_POLL_SECONDS": 3600.0,
    "HEADWAY_KILL_GRACE_SECONDS": 0.5,
    "HEADWAY_THREADS_PER_SLOT": 0,
}


def configure_agent(**overrides: Any) -> None:
    """Set the host agent's settings (``workers.config``) to ``AGENT_TIMING`` plus
    ``overrides``; the ``host_agent`` fixture restores them after the test."""
    from workers import config

    config.configure(**{**AGENT_TIMING, **overrides})


def trial_on_agent(agent: SimpleNamespace, owner, source: dict, model: bytes, slots: int = 1):
    """Register the agent's host with ``slots`` slots, create an experiment (``source``,
    ``model``) through the lifecycle and place its first run on that host; return its trial.

    The test's writes commit (``host_agent`` is transactional), so the placement pass that
    follows the experiment's creation places the run (its task goes to the host's queue, which
    nobody reads); the run stays QUEUED until ``workers.runner.run_trial`` claims it.
    """
    from registry import lifecycle, scheduling
    from registry.models import TrialRun

    agent.register(slots)
    experiment = lifecycle.experiment_create(
        owner=owner, config_source=source, model_definition=model
    )
    trial = experiment.trials.get()
    scheduling.place_queued_runs()
    run = TrialRun.objects.select_related("host").get(trial=trial, run_id=trial.run_id)
    assert run.host is not None and run.host.name == agent.name, trial.scheduling_message
    return trial


def log_lines(trial) -> list[str]:
    """The trial's log messages as stored by the master, oldest first."""
    from registry.models import TrialLog

    return list(
        TrialLog.objects.filter(trial=trial).order_by("id").values_list("message", flat=True)
    )
