"""``python -m workers.slurm_node``: a node of a Headway Slurm job finds its host name and key."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO
from workers.config import AgentConfigError
from workers.slurm_node import _node_identity

JOB = {"HEADWAY_SLURM_HOSTS": "slurm-r9-n0,slurm-r9-n1", "HEADWAY_SLURM_HOST_KEYS": "hwh_a,hwh_b"}


def test_each_node_takes_its_own_host_and_key():
    assert _node_identity({**JOB, "SLURM_NODEID": "0"}) == (0, "slurm-r9-n0", "hwh_a")
    assert _node_identity({**JOB, "SLURM_NODEID": "1"}) == (1, "slurm-r9-n1", "hwh_b")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"HEADWAY_SLURM_HOSTS": "", "HEADWAY_SLURM_HOST_KEYS": "", "SLURM_NODEID": "0"},
            "HEADWAY_SLURM_HOSTS, HEADWAY_SLURM_HOST_KEYS unset",
        ),
        ({**JOB, "SLURM_NODEID": "2"}, "node 2 of a job whose HEADWAY_SLURM_HOSTS lists 2"),
        ({**JOB, "SLURM_NODEID": "x"}, "SLURM_NODEID must be an integer"),
        ({**JOB, "SLURM_NODEID": ""}, "SLURM_NODEID unset: workers.slurm_node runs inside"),
    ],
)
def test_a_job_without_headways_variables_is_refused_naming_them(env, message):
    with pytest.raises(AgentConfigError, match=message):
        _node_identity(env)


def test_outside_a_job_it_exits_2_saying_why():
    done = subprocess.run(
        [sys.executable, "-m", "workers.slurm_node"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "runs inside a Headway Slurm job" in done.stderr
