"""Shared by the Lightning example's end-to-end tests: pause a trial once it logged, activate it
and wait for it to complete."""

from __future__ import annotations

from typing import Any


def pause_then_complete(cluster_api: Any, trial_id: int, max_steps: int) -> tuple[dict, dict]:
    """Pause the trial once 10 steps are recorded (HeadwayCallback saves and stops), check that
    exactly one checkpoint is the pause's, activate it and wait until it completes; return that
    checkpoint and the completed trial."""
    cluster_api.wait_trial(trial_id, lambda t: t["steps_completed"] >= 10, "the first log")
    cluster_api.post(f"trials/{trial_id}/pause")
    cluster_api.wait_trial(
        trial_id, lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    checkpoints = cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]
    preempted = [c for c in checkpoints if c["metadata"]["lightning"].get("preempted")]
    assert len(preempted) == 1
    paused_at = preempted[0]["steps_completed"]
    assert 10 <= paused_at < max_steps
    cluster_api.post(f"trials/{trial_id}/activate")
    done = cluster_api.wait_trial(trial_id, lambda t: t["state"] == "COMPLETED", "COMPLETED")
    return preempted[0], done
