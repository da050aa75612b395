"""Runs of a slurm pool as Slurm batch jobs on a real Slurm (issue #22): a PyTorchTrial
experiment completes and its checkpoint downloads; controls; infrastructure failures."""

from __future__ import annotations

import subprocess

import pytest

from registry import slurm
from tests.helpers import REPO, wait_for
from tests.helpers_slurm import squeue_names

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RESUMABLE = REPO / "tests" / "fixtures" / "resumable"
CORE_API = REPO / "tests" / "fixtures" / "core_api"


def _job_of(slurm_pool, trial: dict) -> int:
    """The Slurm job id of the trial's current run (waits for its submission)."""
    from registry.models import SlurmJob

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
    from registry.models import HostToken, SlurmJob, WorkerHost

    job = wait_for(
        lambda: SlurmJob.objects.filter(job_id=job_id, cleaned=True).first(), 60, "clean-up"
    )
    assert not WorkerHost.objects.filter(slurm_job=job).exists()
    assert not HostToken.objects.live().filter(name__startswith=f"slurm-r{job.run_id}-").exists()
