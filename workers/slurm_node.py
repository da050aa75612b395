"""``python -m workers.slurm_node``: one node's part of a run inside its Slurm job.

The master's batch script (``registry.slurm._script``) starts one of these per node with
``srun``. Each acts as a host agent for exactly one run and then exits:

1. Takes its node's host name and key from ``HEADWAY_SLURM_HOSTS`` / ``HEADWAY_SLURM_HOST_KEYS``
   (comma-separated, one per node, indexed by ``SLURM_NODEID``): the master made a host and a
   host token for each node of this job, so the node reaches only this run.
2. Registers and heartbeats that host (``workers.hosts.HostHeartbeat``: the run's lease).
3. Node 0 runs the run (``workers.runner.run_trial``: claim, launch, logs, exit, the
   rendezvous of the other nodes); node ``i`` runs share ``i`` (``run_trial_share``).
4. Marks the host stopped and exits 0: the run's outcome went to the master over REST.

It sets ``HEADWAY_BATCH_JOB_NODE=1`` (``workers.supervision.BATCH_JOB_NODE``) for the generic
agent code it runs: trial processes start with ``SIGUSR1`` ignored and no run is left for an
agent to re-attach.

Slurm's signals become Headway's preemption: ``USR1`` (sent ``preempt_grace_seconds`` before
the time limit, ``--signal``) and ``TERM`` (``scancel``, Slurm's own preemption, the limit
itself) make this process ask the master to preempt the run (``workers.supervision``, as an
agent's warm shutdown): a trial that watches ``should_preempt()`` checkpoints and exits, and
the run is re-queued (a new job) and resumes there; a run that dies of the signal first is
reported lost, also re-queued and not counted against ``max_restarts``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

from workers import batch_node
from workers.config import AgentConfigError, reload

logger = logging.getLogger("headway.worker")
INSIDE = "workers.slurm_node runs inside a Headway Slurm job"  # what a node process needs


def _job_variables() -> dict[str, str]:
    """The job's node variables from this process's environment ("" when unset)."""
    return {
        "HEADWAY_SLURM_HOSTS": os.environ.get("HEADWAY_SLURM_HOSTS", ""),
        "HEADWAY_SLURM_HOST_KEYS": os.environ.get("HEADWAY_SLURM_HOST_KEYS", ""),
        "SLURM_NODEID": os.environ.get("SLURM_NODEID", ""),
    }


def _node_identity(env: dict[str, str]) -> tuple[int, str, str]:
    """``(node rank, host name, host key)`` of this node from the job's variables
    (``_job_variables``).

    Raises:
        AgentConfigError: a variable is missing, or the lists do not cover this node.
    """
    if not env.get("SLURM_NODEID"):
        raise AgentConfigError(f"SLURM_NODEID unset: {INSIDE}")
    try:
        node = int(env["SLURM_NODEID"])
    except ValueError:
        raise AgentConfigError(
            f"SLURM_NODEID must be an integer, got {env['SLURM_NODEID']!r}"
        ) from None
    name, key = batch_node.node_host(
        env, "HEADWAY_SLURM_HOSTS", "HEADWAY_SLURM_HOST_KEYS", node, "node", INSIDE
    )
    return node, name, key


def _on_signal(signum: int, frame: FrameType | None) -> None:
    batch_node.preempt_in_background(
        f"Slurm sent {signal.Signals(signum).name}", "headway-slurm-signal"
    )


def main() -> int:
    """Run this node's part of the job's run (see module); return the process's exit status:
    0 once the outcome reached the master, 2 for a job started without Headway's variables."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        node, name, key = _node_identity(_job_variables())
        trial_id = int(os.environ["HEADWAY_TRIAL_ID"])
        run_id = int(os.environ["HEADWAY_RUN_ID"])
    except (AgentConfigError, KeyError, ValueError) as exc:
        print(f"headway slurm node: {exc}", file=sys.stderr)
        return 2
    os.environ["HEADWAY_HOST_NAME"] = name
    os.environ["HEADWAY_HOST_TOKEN"] = key
    reload()
    from workers import supervision

    # For this process and the trial's: act as a batch job's node (USR1 ignored, no re-attach).
    os.environ[supervision.BATCH_JOB_NODE] = "1"

    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    logger.info("Slurm node %s: host %s, trial %s run %s", node, name, trial_id, run_id)
    batch_node.run_node_part(node, trial_id, run_id, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
