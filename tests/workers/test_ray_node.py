"""``python -m workers.ray_node``: a bundle's node process finds its host name and key, and a
process started outside a Headway Ray job says why and exits 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO
from workers.config import AgentConfigError
from workers.ray_node import _alive, _node_identity

JOB = {"HEADWAY_RAY_HOSTS": "ray-r9-b0,ray-r9-b1", "HEADWAY_RAY_HOST_KEYS": "hwh_a,hwh_b"}


def test_each_bundle_takes_its_own_host_and_key():
    assert _node_identity(JOB, 0) == ("ray-r9-b0", "hwh_a")
    assert _node_identity(JOB, 1) == ("ray-r9-b1", "hwh_b")


@pytest.mark.parametrize(
    ("env", "index", "message"),
    [
        ({}, 0, "HEADWAY_RAY_HOSTS, HEADWAY_RAY_HOST_KEYS unset"),
        (JOB, 2, "bundle 2 of a job whose HEADWAY_RAY_HOSTS lists 2"),
        ({**JOB, "HEADWAY_RAY_HOST_KEYS": "hwh_a"}, 0, "HEADWAY_RAY_HOST_KEYS 1 keys"),
    ],
)
def test_a_job_without_headways_variables_is_refused_naming_them(env, index, message):
    with pytest.raises(AgentConfigError, match=message):
        _node_identity(env, index)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "not a Headway Ray job's driver"),
        (["--node", "0"], "runs inside a Headway Ray job"),
        (["--node", "x"], "--node takes a bundle index"),
    ],
)
def test_outside_a_job_it_exits_2_saying_why(argv, message):
    done = subprocess.run(
        [sys.executable, "-m", "workers.ray_node", *argv],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert message in done.stderr


def test_a_process_that_ended_is_not_alive_even_before_it_is_reaped():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, left a zombie
    assert not _alive(child.pid)
    child.wait()
    assert not _alive(child.pid)
    assert _alive(os.getpid())
