"""The test Slurm cluster (``deploy/slurm/test-cluster.sh``, started by ``.ci/run``): whether it
answers, and a master worker whose pools file has a slurm pool."""

from __future__ import annotations

import shutil
import subprocess

# The xdist group of the tests that use the shared test Slurm (deploy/slurm/test-cluster.sh):
# `make test`'s --dist loadgroup runs them on one worker, since a second worker's jobs would
# wait for the one node.
SLURM_GROUP = "slurm"


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
