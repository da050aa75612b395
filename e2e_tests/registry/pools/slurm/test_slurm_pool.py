"""Runs of a slurm pool as Slurm batch jobs on a real Slurm: a PyTorchTrial
experiment completes and its checkpoint downloads; controls; infrastructure failures."""

from __future__ import annotations

import re
import subprocess

import pytest

from registry.pools.slurm import manager as slurm
from tests.helpers import REPO, wait_for
from tests.helpers_slurm import SLURM_GROUP, squeue_names

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.xdist_group(SLURM_GROUP),
    pytest.mark.usefixtures("shared_slurm"),
]

RESUMABLE = REPO / "tests" / "fixtures" / "resumable"
CORE_API = REPO / "tests" / "fixtures" / "core_api"


def _job_of(slurm_pool, trial: dict) -> int:
    """The Slurm job id of the trial's current run (waits for its submission)."""
    from registry.pools.slurm.models import SlurmJob

    def find():
        job = (
            SlurmJob.objects.filter(run__trial_id=trial["id"], run__run_id=trial["run_id"])
            .exclude(job_id=None)
            .first()
        )
        return job.job_id if job is not None else None

    return wait_for(find, 60, f"trial {trial['id']}'s job")


def test_a_pytorch_trial_completes_as_one_slurm_job_and_its_checkpoint_downloads(
    slurm_api, slurm_pool
):
    trial = slurm_api.submit(
        RESUMABLE / "exp.yaml", RESUMABLE, resources={"resource_pool": "hpc"}, max_restarts=0
    )
    job_id = _job_of(slurm_pool, {**trial, "run_id": 1})
    assert squeue_names()[job_id].startswith(f"headway-{slurm_pool.namespace}-t{trial['id']}-r1")
    done = slurm_api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end", 300
    )
    logs = "\n".join(slurm_api.logs(trial["id"]))
    assert done["state"] == "COMPLETED", logs[-3000:]
    assert done["restarts"] == 0 and done["run_id"] == 1
    assert "starting on" in logs  # the node process ran the run as a host agent does
    ended = wait_for(
        lambda: (j := slurm.jobs([job_id]).get(job_id)) and not j.active and j, 60, "the job to end"
    )
    assert (ended.state, ended.exit_code) == ("COMPLETED", 0)
    state = slurm_api.checkpoint_state(done["latest_checkpoint"])
    assert state  # the checkpoint the job wrote downloads over REST
    from registry.models import HostToken, WorkerHost
    from registry.pools.slurm.models import SlurmJob

    job = wait_for(
        lambda: SlurmJob.objects.filter(job_id=job_id, cleaned=True).first(), 60, "clean-up"
    )
    assert not WorkerHost.objects.filter(made_for_run_id=job.run_id).exists()
    assert not HostToken.objects.live().filter(name__startswith=f"slurm-r{job.run_id}-").exists()


def _jobs_of(trial_id: int) -> list:
    from registry.pools.slurm.models import SlurmJob

    return list(SlurmJob.objects.filter(run__trial_id=trial_id).order_by("run__run_id"))


def _cpus(job_id: int) -> int:
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%C"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])


def test_two_slots_run_as_one_job_of_two_tasks_and_pause_activate_resumes_exactly(
    slurm_api, slurm_pool
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

    config = core_api_config(2, sleep=0.5)
    config["resources"]["resource_pool"] = "hpc"
    trial = submit(slurm_api, DISTRIBUTED, config)
    paused_steps = pause_then_activate(slurm_api, trial["id"], after_steps=8)
    done = slurm_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED", 300)
    assert done["run_id"] == 2 and done["restarts"] == 0
    check_core_api_resume(slurm_api, trial, 2, paused_steps)  # world size 2, exact resume
    jobs = _jobs_of(trial["id"])
    assert [job.run.run_id for job in jobs] == [1, 2]  # one job per run
    assert all(_cpus(job.job_id) == 2 for job in jobs)  # 2 tasks of 1 CPU each


def test_kill_scancels_the_job_and_the_trial_ends_canceled(slurm_api, slurm_pool):
    trial = slurm_api.submit(
        CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "hpc"},
        hyperparameters={"lr": 0.5, "sleep": 5.0},
    )  # fmt: skip
    slurm_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 1, "training", 120)
    job_id = _jobs_of(trial["id"])[0].job_id
    slurm_api.post(f"trials/{trial['id']}/kill")
    done = slurm_api.wait_trial(trial["id"], lambda t: t["state"] == "CANCELED", "CANCELED", 120)
    assert done["run_id"] == 1
    ended = wait_for(
        lambda: (j := slurm.jobs([job_id]).get(job_id)) and not j.active and j, 60, "the job to end"
    )
    assert ended.state in ("CANCELLED", "COMPLETED")


def test_a_job_scancelled_from_outside_is_a_lost_run_requeued_and_not_counted(
    slurm_api, slurm_pool
):
    trial = slurm_api.submit(
        CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "hpc"},
        hyperparameters={"lr": 0.5, "sleep": 1.5}, max_restarts=0,
    )  # fmt: skip
    slurm_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 2, "training", 120)
    job_id = _jobs_of(trial["id"])[0].job_id
    subprocess.run(["scancel", str(job_id)], check=True)
    done = slurm_api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end", 300
    )
    assert done["state"] == "COMPLETED", "\n".join(slurm_api.logs(trial["id"])[-40:])
    assert done["run_id"] == 2 and done["restarts"] == 0  # max_restarts 0: it was not counted
    jobs = wait_for(
        lambda: (jobs := _jobs_of(trial["id"])) and all(job.cleaned for job in jobs) and jobs,
        60,
        "both jobs to be reconciled",
    )
    assert [job.state for job in jobs] == ["CANCELLED", "COMPLETED"]
    steps, _ = slurm_api.series(trial["id"], "training", "loss")
    assert steps == list(range(1, 9))  # every step once: resumed from its checkpoint


def test_a_job_near_its_time_limit_checkpoints_on_slurms_signal_and_resumes(slurm_api, slurm_pool):
    # hpc-short: a 2-minute limit, USR1 60 s before it (slurmctld checks every 30 s: the signal
    # comes 60-90 s into the job). 100 epochs of 1 s cannot finish in one job.
    trial = slurm_api.submit(
        CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "hpc-short"},
        hyperparameters={"lr": 0.5, "sleep": 1.0}, max_restarts=0,
        environment={"environment_variables": ["EPOCHS=100"]},
        searcher={"name": "single", "metric": "loss", "max_length": 100},
    )  # fmt: skip
    done = slurm_api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end", 420
    )
    logs = slurm_api.logs(trial["id"])
    assert done["state"] == "COMPLETED", "\n".join(logs[-40:])
    assert done["run_id"] >= 2 and done["restarts"] == 0
    assert any(line.startswith("preempted after epoch") for line in logs)  # should_preempt()
    first = wait_for(lambda: (job := _jobs_of(trial["id"])[0]).cleaned and job, 60, "run 1's job")
    assert first.state == "COMPLETED"  # it checkpointed and exited before the limit
    steps, _ = slurm_api.series(trial["id"], "training", "loss")
    assert steps == list(range(1, 101))  # no lost or repeated steps


def test_an_adaptive_asha_search_of_four_trials_runs_through_the_pool(slurm_api, slurm_pool):
    import yaml

    from e2e_tests.registry.searcher.test_search_e2e import CORE_SEARCH, trials_of, wait_experiment
    from e2e_tests.workers.test_distributed_e2e import submit

    config = yaml.safe_load((CORE_SEARCH / "asha.yaml").read_text())
    config["searcher"] = {
        "name": "adaptive_asha", "metric": "loss", "max_length": 8, "max_trials": 4,
        "max_concurrent_trials": 2, "mode": "aggressive",
    }  # fmt: skip
    config["resources"] = {"resource_pool": "hpc"}
    first = submit(slurm_api, CORE_SEARCH, config)
    experiment = wait_experiment(slurm_api, first["experiment_id"], timeout=400)
    assert experiment["state"] == "COMPLETED"
    trials = trials_of(slurm_api, experiment["id"])
    assert len(trials) == 4 and all(t["state"] == "COMPLETED" for t in trials)
    assert max(t["steps_completed"] for t in trials) == 8
    runs = sum(t["run_id"] for t in trials)
    assert sum(len(_jobs_of(t["id"])) for t in trials) == runs  # every run was a Slurm job


def test_a_pending_job_says_slurms_reason_on_its_trial_and_the_workers_page(
    slurm_api, slurm_pool, client, django_user_model
):
    cpus = int(subprocess.run(["sinfo", "-h", "-o", "%C"], capture_output=True, text=True,
                              check=True).stdout.split()[0].split("/")[3])  # fmt: skip
    holder = slurm.submit(
        f"#!/bin/bash\n#SBATCH --job-name=holder-{slurm_pool.namespace}\n#SBATCH --ntasks={cpus}\n"
        "#SBATCH --output=/dev/null\nsleep 300\n"
    )
    try:
        wait_for(lambda: slurm.jobs([holder])[holder].state == "RUNNING", 60, "the holder to run")
        trial = slurm_api.submit(
            CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "hpc"},
            hyperparameters={"lr": 0.5, "sleep": 0.1},
        )  # fmt: skip
        # Slurm names a reason at its first scheduling pass (before it: "None", no reason).
        waiting = slurm_api.wait_trial(
            trial["id"],
            lambda t: re.search(r"pending \((Resources|Priority)\)", t["scheduling_message"]),
            "Slurm's reason",
            90,
        )
        job_id = _jobs_of(trial["id"])[0].job_id
        assert waiting["scheduling_message"] in (
            f"waiting in Slurm: job {job_id} pending (Resources)",
            f"waiting in Slurm: job {job_id} pending (Priority)",
        )
        client.force_login(django_user_model.objects.get(username="researcher"))
        page = client.get("/workers/").content.decode()
        assert f'id="slurm-job-{job_id}"' in page and "PENDING" in page
        (hpc,) = [p for p in slurm_api.get("resource-pools/")["results"] if p["name"] == "hpc"]
        assert (hpc["type"], hpc["jobs_pending"]) == ("slurm", 1)
    finally:
        slurm.cancel(holder)
    done = slurm_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED", 180)
    assert done["scheduling_message"] == "" and done["restarts"] == 0


def test_a_trial_whose_code_fails_is_the_users_failure_as_on_agents(slurm_api, slurm_pool):
    trial = slurm_api.submit(
        CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "hpc"}, max_restarts=0,
        entrypoint="python -c \"print('the trial fails'); raise SystemExit(3)\"",
    )  # fmt: skip
    done = slurm_api.wait_trial(trial["id"], lambda t: t["state"] == "ERROR", "ERROR", 180)
    assert done["run_id"] == 1  # not re-queued: the code failed, not Slurm
    logs = slurm_api.logs(trial["id"])
    assert "the trial fails" in logs and "[headway] run 1 exited with code 3" in logs


def test_a_job_that_fails_before_its_ranks_start_is_retried_with_back_off_then_errors(
    slurm_api, slurm_pool
):
    # The node process cannot start (a python the node does not have): each job is a run lost
    # before its ranks started, re-queued as a new job after a back-off (10 s, then 20 s), not
    # counted in max_restarts; the third in a row ends the trial ERROR naming the cause.
    trial = slurm_api.submit(
        CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": "hpc-broken"},
        max_restarts=5,
    )  # fmt: skip
    done = slurm_api.wait_trial(trial["id"], lambda t: t["state"] == "ERROR", "ERROR", 300)
    assert (done["run_id"], done["restarts"]) == (3, 0)
    jobs = wait_for(
        lambda: (jobs := _jobs_of(trial["id"])) and all(job.cleaned for job in jobs) and jobs,
        60,
        "the three jobs to be reconciled",
    )
    assert [job.state for job in jobs] == ["FAILED"] * 3
    last = jobs[-1].job_id
    cause = f"Slurm job {last} ended FAILED"
    assert done["scheduling_message"].startswith(
        "failed: lost before its ranks started 3 times in a row (max_lost_before_start 3); "
        f"last: {cause}"
    ), done["scheduling_message"]
    logs = slurm_api.logs(trial["id"])
    assert logs[-1].startswith("[headway] run 3: failed: lost before its ranks started"), logs
    # The first two losses said when the next job would be submitted.
    for run_id, (losses, delay) in enumerate([(1, 10), (2, 20)], start=1):
        said = [line for line in logs if line.startswith(f"[headway] run {run_id}: ")]
        assert len(said) == 1 and f", {losses} of 3 in a row)" in said[0], logs
        assert said[0].endswith(f"(in {delay} s)"), said
    # Each job's own output (srun's error about the missing interpreter) is in the trial's log.
    assert (
        sum(line.startswith("[slurm] ") and "/nonexistent/bin/python" in line for line in logs) >= 3
    )
