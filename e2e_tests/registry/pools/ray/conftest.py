"""A ray pool on a Ray cluster of namespaced nodes (``tests.helpers_ray``: a head and two
workers, each in its own network namespace on its own address), served by a master on a bridge
address of its own (``tests.netns_cluster``, no host agents) that the Ray nodes reach through a
route to it. The pool ``ray-broken`` names a Python the nodes lack. The pool ``ray`` spreads each slot over a node of its own (``STRICT_SPREAD``); the
jobs run ``workers.ray_node`` from this checkout (``PYTHONPATH`` in its runtime environment)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.helpers import REPO
from tests.netns_cluster import NetnsCluster


@pytest.fixture(scope="module")
def ray_netns(ray_cluster, tmp_path_factory):
    """``(master, ray cluster)``: the master's pool ``ray`` on the namespaced Ray cluster."""
    base = tmp_path_factory.mktemp("ray-netns")
    pools = base / "pools.yaml"
    master = NetnsCluster(
        base,
        hosts=(),
        agents=False,
        master_env={
            "HEADWAY_RESOURCE_POOLS": str(pools),
            "HEADWAY_RAY_POLL_SECONDS": "1",
            "RAY_AUTH_MODE": "disabled",  # the cluster's mode (tests.helpers_ray)
        },
    )
    pools.write_text(
        yaml.safe_dump(
            [
                {"name": "default", "type": "agent"},
                {
                    "name": "ray",
                    "type": "ray",
                    "address": ray_cluster.dashboard_url,
                    "strategy": "STRICT_SPREAD",
                    "python": sys.executable,
                    "work_dir": str(base / "work"),
                    "runtime_env": {"env_vars": {"PYTHONPATH": str(REPO)}},
                },
                {
                    "name": "ray-broken",
                    "type": "ray",
                    "address": ray_cluster.dashboard_url,
                    "python": "/nonexistent/bin/python",  # what the Ray nodes do not have
                },
            ]
        )
    )
    with master:
        for node in ray_cluster.nodes:  # the master's bridge address, through the Ray bridge
            subprocess.run(
                ["ip", "netns", "exec", node.netns, "ip", "route", "add", f"{master.master}/32",
                 "via", ray_cluster.master_ip],
                check=True,
            )  # fmt: skip
        yield master, ray_cluster
