"""The test Slurm cluster (``deploy/slurm/test-cluster.sh``, started by ``.ci/run``): whether it
answers, and a master worker whose pools file has a slurm pool."""

from __future__ import annotations

import shutil
import subprocess

# The xdist group of the tests that use the shared test Slurm (deploy/slurm/test-cluster.sh),
# since a second worker's jobs would wait for the one node (tests/ordering.py makes pytest 9.2
# see the group). Those modules also hold SLURM_LOCK while they run
# (e2e_tests/registry/pools/slurm/conftest.py), for a run without ``--dist loadgroup``.
SLURM_GROUP = "slurm"
SLURM_LOCK = "/tmp/headway-test-slurm.lock"  # an flock: one test module on the shared Slurm


def slurm_up() -> bool:
    """Whether a Slurm controller answers ``sinfo`` with at least one node."""
    if shutil.which("sinfo") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and bool(done.stdout.strip())


def squeue_names() -> dict[int, str]:
    """Job id -> name of every job slurmctld lists (pending, running or recently ended)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%i %j"], capture_output=True, text=True, check=True
    ).stdout
    return {int(job): name for job, name in (line.split(" ", 1) for line in out.splitlines())}
