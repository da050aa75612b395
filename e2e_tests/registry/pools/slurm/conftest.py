"""A slurm pool on the test Slurm cluster, served by the suite's live server: a master worker of
its own namespace whose pools file lists ``hpc`` (type slurm); jobs run ``workers.slurm_node``
from this checkout's Python on the Slurm node, which reaches the live server over HTTP."""

from __future__ import annotations

import fcntl
import subprocess
import types
import uuid

import pytest

from registry.pools.slurm import manager as slurm
from tests.helpers import require, start_master_worker, wait_for
from tests.helpers_cluster import ClusterAPI
from tests.helpers_slurm import SLURM_LOCK, slurm_up, squeue_names

POOLS = """
- name: default
  type: agent
- name: hpc
  type: slurm
  partition: debug
  time_limit: "{time_limit}"
  preempt_grace_seconds: {grace}
- name: hpc-short
  type: slurm
  partition: debug
  time_limit: "2"
  preempt_grace_seconds: 60
- name: hpc-broken
  type: slurm
  partition: debug
  python: /nonexistent/bin/python
"""


@pytest.fixture(scope="module")
def slurm_pool(cluster, tmp_path_factory):
    """The master worker of a namespace with slurm pools ``hpc`` (no time limit to speak of)
    , ``hpc-short`` (a 2-minute limit, USR1 60 s before it) and ``hpc-broken`` (a ``python``
    the node does not have)."""
    require(slurm_up(), "no Slurm cluster answers sinfo (deploy/slurm/test-cluster.sh start)")
    base = tmp_path_factory.mktemp("slurm-pool")
    pools = base / "pools.yaml"
    pools.write_text(POOLS.format(time_limit="60", grace=30))
    namespace = f"headway-slurm-{uuid.uuid4().hex[:8]}"
    env = dict(
        cluster.env,
        HEADWAY_RESOURCE_POOLS=str(pools),
        HEADWAY_SLURM_POLL_SECONDS="1",
        HEADWAY_WORK_DIR=str(base / "work"),
    )
    master = start_master_worker(env, base / "master.log", namespace)
    try:
        yield types.SimpleNamespace(
            pools=pools, namespace=namespace, master_log=base / "master.log", work=base / "work"
        )
    finally:
        master.terminate()
        try:
            master.wait(timeout=20)
        except subprocess.TimeoutExpired:
            master.kill()
        # Jobs a failed test left behind. Their host agents stop their runs on the way out (and
        # keep calling the live server meanwhile), so the next module starts after they end.
        ours = [job for job, name in squeue_names().items() if namespace in name]
        if ours:
            subprocess.run(["scancel", *map(str, ours)], check=False)
            wait_for(
                lambda: not any(job.active for job in slurm.jobs(ours).values()),
                120,
                "the module's Slurm jobs to end",
            )


@pytest.fixture
def slurm_api(slurm_pool, cluster_token, settings) -> ClusterAPI:
    """A user's REST view of the cluster whose runs go to the slurm pool's namespace."""
    settings.CELERY_TASK_DEFAULT_QUEUE = slurm_pool.namespace
    settings.HEADWAY_RESOURCE_POOLS = str(slurm_pool.pools)
    settings.HEADWAY_WORK_DIR = slurm_pool.work
    return ClusterAPI(settings.HEADWAY_MASTER_URL, cluster_token)


@pytest.fixture(scope="module")
def shared_slurm():
    """Hold the shared test Slurm for the whole module: another xdist worker's module waits
    (an ``flock``, released when the file closes, or by the kernel if this process dies), so no
    other test's jobs take the node's CPUs from under this module's."""
    with open(SLURM_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
