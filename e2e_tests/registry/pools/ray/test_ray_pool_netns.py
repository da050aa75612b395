"""Runs of a ray pool over a Ray cluster of namespaced nodes: a head and two workers, each in
its own network namespace on its own address (``tests.helpers_ray``), and a master on a bridge
address of its own (``tests.netns_cluster``, no host agents) that the Ray nodes reach through a
route to it. The pool spreads each slot over a node of its own (``STRICT_SPREAD``): a 2-slot
Core API trial over two Ray nodes pauses and resumes exactly, a 2-slot PyTorchTrial completes
over two Ray nodes, and a Ray worker node killed mid-trial is a lost run, re-queued and not
charged, with every step stored once. No process of any run is left behind."""

from __future__ import annotations

import pytest
import yaml

from e2e_tests.registry.pools.ray.helpers import finished_jobs, node_processes, pool_config
from e2e_tests.workers.test_distributed_e2e import (
    check_core_api_resume,
    core_api_config,
    pause_then_activate,
    submit,
)
from tests.helpers import REPO, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT = 300
RESUMABLE = REPO / "tests" / "fixtures" / "resumable"


def test_a_two_slot_trial_spans_two_ray_nodes_and_pause_activate_resumes_exactly(ray_netns):
    master, ray = ray_netns
    api = master.api
    config = pool_config(2, core_api_config(2, sleep=0.3))
    config["checkpoint_storage"] = master.shared_storage()
    trial = submit(api, REPO / "examples" / "core_api_distributed", config)
    paused = pause_then_activate(api, trial["id"], after_steps=8)
    done = api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "done", TIMEOUT)
    assert done["run_id"] == 2 and done["restarts"] == 0
    check_core_api_resume(api, trial, 2, paused)  # world size 2, every step once
    jobs = wait_for(
        lambda: len(j := finished_jobs(master, trial["id"])) == 2 and j, 60, "both jobs"
    )
    addresses = {node.ip for node in ray.nodes}
    for _, state, nodes in jobs:
        assert state == "SUCCEEDED"
        placed = nodes.split(",")
        assert len(set(placed)) == 2 and set(placed) <= addresses  # one slot per Ray node
    wait_for(lambda: not node_processes(), 60, "the node processes to end")


def test_a_pytorch_trial_of_two_slots_completes_over_two_ray_nodes(ray_netns):
    master, _ = ray_netns
    api = master.api
    config = pool_config(2, yaml.safe_load((RESUMABLE / "exp.yaml").read_text()))
    config["checkpoint_storage"] = master.shared_storage()
    config["max_restarts"] = 0
    trial = submit(api, RESUMABLE, config)
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", TIMEOUT
    )
    assert done["state"] == "COMPLETED", api.logs(trial["id"])[-40:]
    assert done["run_id"] == 1
    ((_, state, nodes),) = wait_for(lambda: finished_jobs(master, trial["id"]), 60, "the job")
    assert state == "SUCCEEDED" and len(set(nodes.split(","))) == 2


def test_a_ray_worker_node_killed_mid_trial_is_lost_requeued_and_not_charged(ray_netns):
    master, ray = ray_netns
    api = master.api
    config = pool_config(2, core_api_config(2, sleep=0.3))
    config["checkpoint_storage"] = master.shared_storage()
    config["max_restarts"] = 0
    trial = submit(api, REPO / "examples" / "core_api_distributed", config)
    api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 8, "training", TIMEOUT)
    running = master.psql(
        "SELECT j.nodes FROM registry_rayjob j JOIN registry_trialrun r ON r.id = j.run_id"
        f" WHERE r.trial_id = {int(trial['id'])} AND r.run_id = 1"
    ).strip()
    victim = next(n for n in ray.workers if n.ip in running.split(","))
    ray.kill_node(victim.name)
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", TIMEOUT
    )
    assert done["state"] == "COMPLETED", api.logs(trial["id"])[-40:]
    assert done["run_id"] == 2 and done["restarts"] == 0  # max_restarts 0: not charged
    jobs = wait_for(
        lambda: len(j := finished_jobs(master, trial["id"])) == 2 and j, 60, "both jobs"
    )
    assert jobs[0][1] in ("FAILED", "STOPPED", "GONE") and jobs[1][1] == "SUCCEEDED"
    assert victim.ip not in jobs[1][2].split(",")  # the re-queued run avoided the lost node
    steps, _ = api.series(trial["id"], "training", "loss")
    assert steps == [4 * (epoch + 1) for epoch in range(6)]  # every epoch's steps stored once
    wait_for(lambda: not node_processes(), 60, "the node processes to end")
