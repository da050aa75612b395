"""The namespaced Ray cluster of ``tests.helpers_ray``: three nodes on their own addresses, a
STRICT_SPREAD placement group that puts one task on each, a killed node that Ray reports dead,
and nothing of the cluster left once it is gone."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests import helpers_ray
from tests.helpers import wait_for
from tests.helpers_ray import RayCluster, ray_pids
from tests.netns_network import namespace_pids

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# A driver: one task per bundle of a 3-bundle STRICT_SPREAD group, each reporting its node's
# address as Ray has it and the address its own namespace routes to the head from.
SPREAD_DRIVER = """
import json, os, socket
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init()

@ray.remote(num_cpus=1)
def where():
    head = os.environ["RAY_ADDRESS"].rpartition(":")[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((head, 9))  # UDP: no packet, only the route's source address
        return [ray.util.get_node_ip_address(), sock.getsockname()[0]]

group = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
ray.get(group.ready(), timeout=120)
refs = [
    where.options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)
    ).remote()
    for i in range(3)
]
print("RESULT" + json.dumps(ray.get(refs, timeout=120)))
"""


def run_driver(cluster: RayCluster, code: str) -> object:
    """Run ``code`` as a Ray driver on the head node; its ``RESULT{json}`` line, parsed."""
    proc = cluster.start_in(
        cluster.head, [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    line = next(x for x in out.decode().splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def test_three_nodes_are_alive_each_on_its_namespace_address(ray_cluster):
    addresses = sorted(node.ip for node in ray_cluster.nodes)
    assert len(set(addresses)) == 3
    assert ray_cluster.alive_nodes() == addresses
    heads = [row["node_ip"] for row in ray_cluster.nodes_state() if row["is_head_node"]]
    assert heads == [ray_cluster.head.ip]
    assert ray_cluster.gcs_address == f"{ray_cluster.head.ip}:6380"
    for node in ray_cluster.nodes:  # each node's daemons run in its own namespace
        assert namespace_pids(node.netns)
    assert ray_cluster.master_ip not in addresses


def test_a_strict_spread_group_runs_one_task_on_each_node(ray_cluster):
    places = run_driver(ray_cluster, SPREAD_DRIVER)
    assert all(ray_ip == own_ip for ray_ip, own_ip in places)
    assert sorted(ray_ip for ray_ip, _ in places) == sorted(node.ip for node in ray_cluster.nodes)


def test_a_killed_worker_node_is_reported_dead(ray_cluster):
    lost = ray_cluster.node("ray-w2")
    ray_cluster.kill_node("ray-w2")
    assert not namespace_pids(lost.netns)

    def dead() -> bool:
        states = {row["node_ip"]: row["state"] for row in ray_cluster.nodes_state()}
        return states.get(lost.ip) == "DEAD"

    wait_for(dead, 120, "Ray to report ray-w2 dead")
    assert ray_cluster.alive_nodes() == sorted([ray_cluster.head.ip, ray_cluster.node("ray-w1").ip])


def test_nothing_of_the_cluster_is_left_once_it_is_gone():
    with helpers_ray.ray_cluster(workers=1, cpus_per_node=1, resources={"probe": 1.0}) as cluster:
        total = {r["node_ip"]: r["resources_total"] for r in cluster.nodes_state()}
        assert set(total) == {cluster.head.ip, cluster.workers[0].ip}
        assert all(t["CPU"] == 1.0 and t["probe"] == 1.0 for t in total.values())
        assert all("GPU" not in t for t in total.values())
        namespaces = [node.netns for node in cluster.nodes]
        temp_dir = cluster.temp_dir
        assert ray_pids(temp_dir)  # its raylets, GCS, agents
    assert not ray_pids(temp_dir)
    assert not temp_dir.exists()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in namespaces if ns in listed.split()]
    addresses = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    assert f" {cluster.master_ip}/" not in addresses  # its bridge is gone
