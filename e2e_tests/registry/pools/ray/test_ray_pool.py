"""Controls and Ray's own view of a ray pool's runs, on the namespaced Ray cluster (this
folder's conftest): kill stops the job, a job stopped from outside Headway is a lost run,
re-queued and not counted, and a run the cluster cannot place waits saying why in Ray's words,
shown with the pool's capacity; a driver that cannot start is a run lost before start, whose
trial's log has Ray's message."""

from __future__ import annotations

import pytest
from ray.job_submission import JobSubmissionClient

from e2e_tests.registry.pools.ray.helpers import finished_jobs, node_processes, pool_config
from tests.helpers import REPO, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORE_API = REPO / "tests" / "fixtures" / "core_api"
TIMEOUT = 240


def _submission(master, trial_id: int, run_id: int) -> str:
    return wait_for(
        lambda: master.psql(
            "SELECT j.submission_id FROM registry_rayjob j JOIN registry_trialrun r"
            f" ON r.id = j.run_id WHERE r.trial_id = {int(trial_id)} AND r.run_id = {run_id}"
        ).strip(),
        60,
        f"trial {trial_id} run {run_id}'s job",
    )


def _core_api(master, **hparams) -> dict:
    import yaml

    from e2e_tests.workers.test_distributed_e2e import submit

    config = pool_config(1, yaml.safe_load((CORE_API / "exp.yaml").read_text()))
    config["hyperparameters"].update(hparams)
    config["checkpoint_storage"] = master.shared_storage()
    config["max_restarts"] = 0
    return submit(master.api, CORE_API, config)


def test_kill_stops_the_job_and_the_trial_ends_canceled(ray_netns):
    master, _ = ray_netns
    trial = _core_api(master, lr=0.5, sleep=5.0)
    master.api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 1, "training", TIMEOUT)
    master.api.post(f"trials/{trial['id']}/kill")
    done = master.api.wait_trial(trial["id"], lambda t: t["state"] == "CANCELED", "CANCELED", 120)
    assert done["run_id"] == 1
    ((_, state, _),) = wait_for(lambda: finished_jobs(master, trial["id"]), 60, "the job")
    assert state in ("STOPPED", "SUCCEEDED")
    wait_for(lambda: not node_processes(), 60, "the node processes to end")


def test_a_job_stopped_from_outside_is_a_lost_run_requeued_and_not_counted(ray_netns):
    master, ray = ray_netns
    trial = _core_api(master, lr=0.5, sleep=1.0)
    master.api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 2, "training", TIMEOUT)
    JobSubmissionClient(ray.dashboard_url).stop_job(_submission(master, trial["id"], 1))
    done = master.api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", TIMEOUT
    )
    assert done["state"] == "COMPLETED", master.api.logs(trial["id"])[-40:]
    assert done["run_id"] == 2 and done["restarts"] == 0  # max_restarts 0: not counted
    jobs = wait_for(lambda: len(j := finished_jobs(master, trial["id"])) == 2 and j, 60, "jobs")
    assert [state for _, state, _ in jobs] == ["STOPPED", "SUCCEEDED"]
    steps, _ = master.api.series(trial["id"], "training", "loss")
    assert steps == list(range(1, 9))  # every step once: resumed from its checkpoint


def test_a_run_ray_cannot_place_waits_saying_why_with_the_clusters_capacity(ray_netns):
    import yaml

    from e2e_tests.workers.test_distributed_e2e import submit

    master, ray = ray_netns
    config = pool_config(4, yaml.safe_load((CORE_API / "exp.yaml").read_text()))
    trial = submit(master.api, CORE_API, config)  # 4 slots spread: more nodes than Ray has
    waiting = master.api.wait_trial(
        trial["id"], lambda t: "placement group" in (t.get("scheduling_message") or ""), "why"
    )
    assert "waiting in Ray" in waiting["scheduling_message"]
    assert "PENDING" in waiting["scheduling_message"]
    pools = {p["name"]: p for p in master.api.get("resource-pools/")["results"]}
    assert pools["ray"]["jobs_pending"] == 1 and pools["ray"]["cluster_error"] == ""
    assert pools["ray"]["cluster_nodes"] == len(ray.alive_nodes())
    assert pools["ray"]["cluster_slots"] == 2 * len(ray.alive_nodes())  # 2 CPUs a node
    (reason,) = pools["ray"]["pending_reasons"]
    assert reason.startswith(_submission(master, trial["id"], 1)) and "PENDING" in reason
    master.api.post(f"trials/{trial['id']}/kill")
    master.api.wait_trial(trial["id"], lambda t: t["state"] == "CANCELED", "CANCELED", 120)
    ((_, state, _),) = wait_for(lambda: finished_jobs(master, trial["id"]), 60, "the job")
    assert state == "STOPPED"  # the job whose group never placed is stopped


def test_a_job_whose_driver_cannot_start_is_lost_before_start_with_rays_message(ray_netns):
    import yaml

    from e2e_tests.workers.test_distributed_e2e import submit

    master, _ = ray_netns
    config = yaml.safe_load((CORE_API / "exp.yaml").read_text())
    config["resources"] = {"resource_pool": "ray-broken"}
    config["max_lost_before_start"] = 1
    trial = submit(master.api, CORE_API, config)
    done = master.api.wait_trial(trial["id"], lambda t: t["state"] == "ERROR", "ERROR", TIMEOUT)
    assert (done["run_id"], done["restarts"]) == (1, 0)
    assert "lost before its ranks started" in done["scheduling_message"]
    logs = master.api.logs(trial["id"])
    assert any(line.startswith("[ray] ") and "/nonexistent/bin/python" in line for line in logs)
    ((_, state, _),) = wait_for(lambda: finished_jobs(master, trial["id"]), 60, "the job")
    assert state == "FAILED"
