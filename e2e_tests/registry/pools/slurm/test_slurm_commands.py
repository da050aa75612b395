"""registry.pools.slurm's command layer against a real Slurm (deploy/slurm/test-cluster.sh; `.ci/run`
starts it): submission, pending reasons, exit codes, cancellation and refusals as Slurm reports
them."""

from __future__ import annotations

import subprocess

import pytest

from registry.pools.slurm import manager as slurm
from tests.helpers import require, wait_for
from tests.helpers_slurm import SLURM_GROUP, slurm_up

pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group(SLURM_GROUP),
    pytest.mark.usefixtures("shared_slurm"),
]


@pytest.fixture(scope="module")
def cluster_cpus() -> int:
    require(slurm_up(), "no Slurm cluster answers sinfo (deploy/slurm/test-cluster.sh start)")
    out = subprocess.run(["sinfo", "-h", "-o", "%C"], capture_output=True, text=True, check=True)
    # %C is allocated/idle/other/total CPUs.
    return int(out.stdout.split()[0].split("/")[3])


def _script(body: str, *options: str) -> str:
    lines = ["#!/bin/bash", "#SBATCH --job-name=headway-test", "#SBATCH --output=/dev/null"]
    lines += [f"#SBATCH {option}" for option in options]
    return "\n".join([*lines, body, ""])


def _ended(job_id: int) -> slurm.SlurmJob | None:
    job = slurm.jobs([job_id]).get(job_id)
    return job if job is not None and not job.active else None


def test_a_failing_script_ends_failed_with_its_exit_code_and_is_the_users_failure(cluster_cpus):
    job_id = slurm.submit(_script("exit 4"))
    job = wait_for(lambda: _ended(job_id), 60, f"job {job_id} to end")
    assert (job.state, job.exit_code, job.signal) == ("FAILED", 4, None)
    assert job.name == "headway-test"
    assert not job.ended_by_infrastructure


def test_a_clean_exit_is_completed_with_code_zero(cluster_cpus):
    job_id = slurm.submit(_script("true"))
    job = wait_for(lambda: _ended(job_id), 60, f"job {job_id} to end")
    assert (job.state, job.exit_code) == ("COMPLETED", 0)
    assert job.nodes


def test_a_job_waiting_for_cpus_says_resources_and_a_cancelled_job_is_infrastructure(cluster_cpus):
    holder = slurm.submit(_script("sleep 120", f"--ntasks={cluster_cpus}"))
    waiter = slurm.submit(_script("true", "--ntasks=1"))
    try:
        wait_for(lambda: slurm.jobs([holder])[holder].state == "RUNNING", 60, "the holder to run")
        pending = wait_for(
            lambda: (j := slurm.jobs([waiter])[waiter]).reason not in ("None", "") and j,
            60,
            "the waiting job's reason",
        )
        assert pending.state == "PENDING"
        assert pending.reason in ("Resources", "Priority")
        assert pending.active and pending.exit_code is None
    finally:
        slurm.cancel(holder)
        slurm.cancel(waiter)
    cancelled = wait_for(lambda: _ended(holder), 60, "the holder to end")
    assert cancelled.state == "CANCELLED"
    assert cancelled.ended_by_infrastructure


def test_a_signal_reaches_the_batch_script_without_ending_the_job(cluster_cpus, tmp_path):
    marker, trapping = tmp_path / "got-usr1", tmp_path / "trapping"
    # RUNNING comes before bash reaches `trap`: a USR1 sent then would end the job (its default
    # action), so the signal waits until the script says its trap is set.
    body = f"trap 'touch {marker}; exit 0' USR1\ntouch {trapping}\nsleep 120 & wait\n"
    job_id = slurm.submit(_script(body))
    try:
        wait_for(lambda: slurm.jobs([job_id])[job_id].state == "RUNNING", 60, "the job to run")
        wait_for(trapping.exists, 60, "the batch script to set its trap")
        slurm.cancel(job_id, signal="USR1")
        wait_for(marker.exists, 60, "the batch script to get USR1")
        job = wait_for(lambda: _ended(job_id), 60, "the job to end")
    except BaseException:
        # Only a failed wait cancels: a cancel sent while the trapped script is exiting would
        # record the job CANCELLED, not COMPLETED.
        slurm.cancel(job_id)
        raise
    assert (job.state, job.exit_code) == ("COMPLETED", 0)


def test_an_impossible_request_is_refused_with_slurms_message(cluster_cpus):
    with pytest.raises(slurm.SlurmError, match=r"sbatch failed: .*[Ii]nvalid partition"):
        slurm.submit(_script("true", "--partition=headway-no-such-partition"))


def test_an_unknown_job_id_is_absent_and_cancelling_it_is_not_an_error(cluster_cpus):
    assert slurm.jobs([987654321]) == {}
    slurm.cancel(987654321)
