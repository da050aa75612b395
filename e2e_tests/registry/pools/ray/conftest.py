"""A ray pool on a Ray cluster, served by the suite's live server: a master worker of its own
namespace whose pools file lists ``ray`` (type ray) pointing at the cluster's dashboard. The
jobs run ``workers.ray_node`` from this checkout (``PYTHONPATH`` in the pool's runtime
environment) and reach the live server over HTTP.

The cluster is ``HEADWAY_TEST_RAY_DASHBOARD`` (a dashboard URL of a Ray cluster on this
machine, e.g. one started with ``ray start --head --dashboard-port=8290``)."""

from __future__ import annotations

import os
import subprocess
import types
import uuid

import pytest
import yaml

from tests.helpers import REPO, require, start_master_worker
from tests.helpers_cluster import ClusterAPI

DASHBOARD_ENV = "HEADWAY_TEST_RAY_DASHBOARD"


def _dashboard_up(address: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{address}/api/version", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def pools_file(address: str, **settings: object) -> str:
    """The pools file: ``default`` (agents) and ``ray`` on ``address`` with ``settings``."""
    ray = {
        "name": "ray",
        "type": "ray",
        "address": address,
        "runtime_env": {"env_vars": {"PYTHONPATH": str(REPO)}},
        **settings,
    }
    return yaml.safe_dump([{"name": "default", "type": "agent"}, ray])


@pytest.fixture(scope="module")
def ray_pool(cluster, tmp_path_factory):
    """The master worker of a namespace with the ray pool ``ray``."""
    address = os.environ.get(DASHBOARD_ENV, "")
    require(bool(address) and _dashboard_up(address), f"no Ray dashboard at {DASHBOARD_ENV}")
    base = tmp_path_factory.mktemp("ray-pool")
    pools = base / "pools.yaml"
    pools.write_text(pools_file(address))
    namespace = f"headway-ray-{uuid.uuid4().hex[:8]}"
    env = dict(
        cluster.env,
        HEADWAY_RESOURCE_POOLS=str(pools),
        HEADWAY_RAY_POLL_SECONDS="1",
        HEADWAY_WORK_DIR=str(base / "work"),
    )
    master = start_master_worker(env, base / "master.log", namespace)
    try:
        yield types.SimpleNamespace(
            address=address, pools=pools, namespace=namespace, master_log=base / "master.log"
        )
    finally:
        master.terminate()
        try:
            master.wait(timeout=20)
        except subprocess.TimeoutExpired:
            master.kill()
        _stop_ours(address, namespace)


def _stop_ours(address: str, namespace: str) -> None:
    """Stop the jobs of ``namespace`` a failed test left running."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(address)
    for job in client.list_jobs():
        if (job.submission_id or "").startswith(f"headway-{namespace}-") and not (
            job.status.is_terminal()
        ):
            client.stop_job(job.submission_id)


@pytest.fixture
def ray_api(ray_pool, cluster_token, settings) -> ClusterAPI:
    """A user's REST view of the cluster whose runs go to the ray pool's namespace."""
    settings.CELERY_TASK_DEFAULT_QUEUE = ray_pool.namespace
    settings.HEADWAY_RESOURCE_POOLS = str(ray_pool.pools)
    return ClusterAPI(settings.HEADWAY_MASTER_URL, cluster_token)
