"""What the ray pool's tests read back: its jobs from the master's database, the node
processes left on this machine, a config for the pool."""

from __future__ import annotations

import subprocess

from tests.netns_cluster import NetnsCluster


def finished_jobs(master: NetnsCluster, trial_id: int) -> list[tuple[str, str, str]]:
    """``(run id, state, nodes)`` of the trial's Ray jobs, once each is cleaned up."""
    out = master.psql(
        "SELECT r.run_id, j.state, j.nodes FROM registry_rayjob j JOIN registry_trialrun r"
        f" ON r.id = j.run_id WHERE r.trial_id = {int(trial_id)} AND j.cleaned ORDER BY r.run_id"
    )
    return [tuple(line.split("|")) for line in out.strip().splitlines() if line]


def node_processes() -> list[str]:
    """Node processes of Ray jobs still running on this machine."""
    out = subprocess.run(["pgrep", "-af", "workers.ray_node --detach"], capture_output=True)
    return out.stdout.decode().splitlines()


def pool_config(slots: int, config: dict) -> dict:
    """``config`` for ``slots`` slots of the pool ``ray``."""
    config["resources"] = {"slots_per_trial": slots, "resource_pool": "ray"}
    return config
