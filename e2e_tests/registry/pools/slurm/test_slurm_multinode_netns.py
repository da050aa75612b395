"""One trial over two Slurm nodes on their own addresses: a ``slurmctld`` and two
``slurmd`` in network namespaces (``tests.netns_slurm``), a master on the bridge address
(``tests.netns_cluster``, no host agents), and a slurm pool with one slot per node, so a
2-slot trial is one job of 2 nodes: two ``workers.slurm_node`` processes that meet on node 0's
routed address."""

from __future__ import annotations

import os

import pytest

from e2e_tests.workers.test_distributed_e2e import core_api_config, submit
from e2e_tests.workers.test_multihost_netns import hooked_example, host_checks, placement
from tests.helpers import require, wait_for
from tests.helpers_slurm import slurm_up
from tests.netns_cluster import NetnsCluster, require_netns
from tests.netns_slurm import NetnsSlurm

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT = 600


@pytest.fixture(scope="module")
def slurm_netns(tmp_path_factory):
    require_netns()
    require(slurm_up(), "Slurm's daemons and munge are needed (deploy/slurm/test-cluster.sh start)")
    base = tmp_path_factory.mktemp("slurm-netns")
    pools = base / "pools.yaml"
    slurm_dir = base / "slurm"
    slurm_dir.mkdir()
    cluster = NetnsCluster(
        base,
        hosts=("n1", "n2"),
        agents=False,
        master_env={
            "HEADWAY_RESOURCE_POOLS": str(pools),
            "SLURM_CONF": str(slurm_dir / "slurm.conf"),
            "HEADWAY_SLURM_POLL_SECONDS": "1",
        },
    )
    NetnsSlurm.write_pools_file(pools, {"slots_per_node": 1})
    with cluster:
        slurm = NetnsSlurm(cluster, slurm_dir, cpus=os.cpu_count() or 1)
        slurm.start()
        yield cluster, slurm


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return hooked_example(tmp_path_factory.mktemp("model"))


def test_a_two_node_trial_runs_as_one_job_over_both_namespaced_nodes(slurm_netns, model_dir):
    cluster, slurm = slurm_netns
    api = cluster.api
    config = core_api_config(2, sleep=0.3)
    config["resources"]["resource_pool"] = "hpc"
    # The job gets Headway's variables only: no S3 keys (a site gives its nodes their own).
    config["checkpoint_storage"] = cluster.shared_storage()
    trial = submit(api, model_dir, config)
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", timeout=TIMEOUT
    )
    lines = api.logs(trial["id"])
    assert done["state"] == "COMPLETED", lines[-60:]
    assert done["run_id"] == 1 and done["restarts"] == 0
    # One job, both nodes: node 0 on the run, node 1 as its share, each a host made for the job.
    _, ((_, rendezvous),) = placement(cluster, trial["id"], 1)
    query = (
        "SELECT j.job_id, j.nodes, j.state FROM registry_slurmjob j JOIN registry_trialrun r"
        f" ON r.id = j.run_id WHERE r.trial_id = {int(trial['id'])} AND j.cleaned"
    )
    job = wait_for(lambda: cluster.psql(query).strip(), 60, "the job to be reconciled")
    _, nodes, state = job.split("|")
    assert state == "COMPLETED"
    assert nodes == slurm.node_list()  # Slurm's compressed form of both nodes
    # Each node's part ran in its own namespace and advertised its own routed address.
    checks = host_checks(lines)
    assert sorted(check["node"] for check in checks) == ["0", "1"]
    hosts = {check["host"] for check in checks}
    assert hosts == set(slurm.nodes.values())
    addresses = {host.address for host in cluster.hosts.values()}
    assert {check["address"] for check in checks} == addresses
    assert rendezvous.rpartition(":")[0] in addresses
    assert any("Process 1, total 2." in line for line in lines)  # world size 2 over the nodes
