"""A Slurm node on which runs keep failing before their ranks start is excluded from the pool's
later jobs (``registry.pools.slurm._nodes``), on the real one-node test Slurm: the next job carries
``--exclude`` (which sbatch refuses there, the trial saying the exclusion), and an admin's
enable puts the node back."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers import REPO, wait_for
from tests.helpers_cluster import ClusterAPI
from tests.helpers_slurm import SLURM_GROUP

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.xdist_group(SLURM_GROUP),
    pytest.mark.usefixtures("shared_slurm"),
]

CORE_API = REPO / "tests" / "fixtures" / "core_api"
POOL = "hpc-broken"  # a python the node does not have: every job fails before its ranks start


def _admin(settings, django_user_model) -> ClusterAPI:
    from rest_framework.authtoken.models import Token

    staff = django_user_model.objects.create_user("slurm-admin", is_staff=True)
    return ClusterAPI(settings.HEADWAY_MASTER_URL, Token.objects.create(user=staff).key)


def _job_of(trial: dict) -> int | None:
    from registry.pools.slurm.models import SlurmJob

    job = SlurmJob.objects.filter(run__trial_id=trial["id"]).exclude(job_id=None).first()
    return job.job_id if job is not None else None


def test_a_node_where_runs_keep_failing_to_start_is_excluded_until_an_admin_enables_it(
    slurm_api, slurm_pool, settings, django_user_model
):
    (node,) = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True
    ).stdout.split()
    # Three runs lost before start in a row (HEADWAY_HOST_MAX_FAILED_STARTS 3, as
    # max_lost_before_start): the trial ends ERROR and the node is excluded.
    first = slurm_api.submit(CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": POOL})
    slurm_api.wait_trial(first["id"], lambda t: t["state"] == "ERROR", "ERROR", 300)
    pools = {pool["name"]: pool for pool in slurm_api.get("resource-pools/")["results"]}
    (excluded,) = wait_for(
        lambda: [
            pool["excluded_nodes"]
            for pool in slurm_api.get("resource-pools/")["results"]
            if pool["name"] == POOL and pool["excluded_nodes"]
        ],
        60,
        f"node {node} shown excluded",
    )
    assert [shown["name"] for shown in excluded] == [node]
    assert excluded[0]["excluded_reason"].startswith(
        "excluded automatically: 3 runs in a row were lost on it before their ranks started "
        "(HEADWAY_HOST_MAX_FAILED_STARTS 3); last: Slurm job "
    ), excluded
    assert pools["hpc"]["excluded_nodes"] == []  # another pool's jobs may still use it
    logs = slurm_api.logs(first["id"])
    assert any(
        line.startswith(f"[headway] Slurm node {node} of pool {POOL} excluded") for line in logs
    )
    # The next job excludes the only node: sbatch refuses it, and the trial says why.
    second = slurm_api.submit(CORE_API / "exp.yaml", CORE_API, resources={"resource_pool": POOL})
    refused = slurm_api.wait_trial(
        second["id"], lambda t: "Slurm refused the job" in t["scheduling_message"], "refusal", 60
    )
    assert (
        f"the job excluded pool {POOL}'s node(s) {node}, which Headway excluded after runs "
        f"failed to start there (headway pool enable-node {POOL} NODE puts one back)"
    ) in refused["scheduling_message"], refused["scheduling_message"]
    assert _job_of(second) is None
    # Only an admin puts it back; then the trial's job is submitted, excluding nothing.
    url = f"resource-pools/{POOL}/nodes/{node}/enable/"
    slurm_api.post(url, expect=403)
    enabled = _admin(settings, django_user_model).post(url)
    assert (enabled["name"], enabled["excluded_reason"], enabled["failed_starts"]) == (node, "", 0)
    job_id = wait_for(lambda: _job_of(second), 60, "the second trial's job")
    shown = subprocess.run(
        ["scontrol", "show", "job", str(job_id)], capture_output=True, text=True, check=True
    ).stdout
    assert "ExcNodeList=(null)" in shown, shown
    slurm_api.post(f"trials/{second['id']}/kill/")
