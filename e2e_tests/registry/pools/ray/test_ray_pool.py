"""Runs of a ray pool as Ray jobs on a real Ray cluster (one node, this machine's): a 2-slot
Core API trial pauses and resumes exactly; kill stops the job; a job stopped from outside is a
lost run, re-queued and not counted; the pool shows the cluster's capacity."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORE_API = REPO / "tests" / "fixtures" / "core_api"


def _jobs_of(trial_id: int) -> list:
    from registry.pools.ray.models import RayJob

    return list(RayJob.objects.filter(run__trial_id=trial_id).order_by("run__run_id"))


def _cleaned(trial_id: int, count: int) -> list:
    return wait_for(
        lambda: len(jobs := _jobs_of(trial_id)) == count and all(j.cleaned for j in jobs) and jobs,
        60,
        f"{count} job(s) of trial {trial_id} to be reconciled",
    )


def test_two_slots_run_as_one_job_of_two_bundles_and_pause_activate_resumes_exactly(
    ray_api, ray_pool
):
    from e2e_tests.workers.test_distributed_e2e import (
        CORE_API as DISTRIBUTED,
    )
    from e2e_tests.workers.test_distributed_e2e import (
        check_core_api_resume,
        core_api_config,
        pause_then_activate,
        submit,
    )
    from registry.models import HostToken, WorkerHost

    config = core_api_config(2, sleep=0.3)
    config["resources"]["resource_pool"] = "ray"
    trial = submit(ray_api, DISTRIBUTED, config)
    paused_steps = pause_then_activate(ray_api, trial["id"], after_steps=8)
    done = ray_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED", 300)
    assert done["run_id"] == 2 and done["restarts"] == 0
    check_core_api_resume(ray_api, trial, 2, paused_steps)  # world size 2, exact resume
    jobs = _cleaned(trial["id"], 2)
    assert [job.state for job in jobs] == ["SUCCEEDED", "SUCCEEDED"]  # one job per run
    assert all(len(job.nodes.split(",")) == 2 for job in jobs)  # two bundles placed
    assert not WorkerHost.objects.filter(made_for_run__trial_id=trial["id"]).exists()
    assert not HostToken.objects.live().filter(name__startswith="ray-r").exists()


def test_kill_stops_the_job_and_the_trial_ends_canceled(ray_api, ray_pool):
    trial = ray_api.submit(
        CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "ray"},
        hyperparameters={"lr": 0.5, "sleep": 5.0},
    )  # fmt: skip
    ray_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 1, "training", 120)
    ray_api.post(f"trials/{trial['id']}/kill")
    done = ray_api.wait_trial(trial["id"], lambda t: t["state"] == "CANCELED", "CANCELED", 120)
    assert done["run_id"] == 1
    (job,) = _cleaned(trial["id"], 1)
    assert job.state in ("STOPPED", "SUCCEEDED")


def test_a_job_stopped_from_outside_is_a_lost_run_requeued_and_not_counted(ray_api, ray_pool):
    from ray.job_submission import JobSubmissionClient

    trial = ray_api.submit(
        CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "ray"},
        hyperparameters={"lr": 0.5, "sleep": 1.5}, max_restarts=0,
    )  # fmt: skip
    ray_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 2, "training", 120)
    JobSubmissionClient(ray_pool.address).stop_job(_jobs_of(trial["id"])[0].submission_id)
    done = ray_api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end", 300
    )
    assert done["state"] == "COMPLETED", "\n".join(ray_api.logs(trial["id"])[-40:])
    assert done["run_id"] == 2 and done["restarts"] == 0  # max_restarts 0: it was not counted
    jobs = _cleaned(trial["id"], 2)
    assert [job.state for job in jobs] == ["STOPPED", "SUCCEEDED"]
    steps, _ = ray_api.series(trial["id"], "training", "loss")
    assert steps == list(range(1, 9))  # every step once: resumed from its checkpoint
    pools = {p["name"]: p for p in ray_api.get("resource-pools/")["results"]}
    assert pools["ray"]["cluster_nodes"] >= 1 and pools["ray"]["cluster_slots"] >= 2
    assert pools["ray"]["cluster_error"] == "" and pools["ray"]["jobs_running"] == 0
