"""Slurm as a resource manager: the master's side of a ``slurm`` resource pool, in one place.

The master worker's ``headway.pool_poll`` task for the slurm type (every
``HEADWAY_SLURM_POLL_SECONDS``: ``provider.SlurmProvider``) submits each queued run of a slurm
pool as one batch job (``_submit``; the script: ``_script``) and keeps runs and jobs in step
(``_reconcile``), keeping its jobs off nodes where runs keep failing to start (``_nodes``), with
Slurm's own client commands (``_commands``). Slurm places the jobs (gang allocation, fair share,
backfill, time limits, node failures); inside a job, ``workers.slurm_node`` runs the run over
REST as a host agent does.
"""

from __future__ import annotations

from registry.pools.slurm._commands import (
    ACTIVE_STATES,
    INFRASTRUCTURE_END_STATES,
    PROCESS_END_STATES,
    SlurmError,
    SlurmJob,
    cancel,
    jobs,
    submit,
)
from registry.pools.slurm._nodes import (
    SlurmNodeNotFound,
    excluded_nodes,
    node_enable,
    nodes_failed_start,
    nodes_started,
)
from registry.pools.slurm._reconcile import reconcile_jobs
from registry.pools.slurm._submit import node_host_name, submit_queued_runs

__all__ = [
    "ACTIVE_STATES",
    "INFRASTRUCTURE_END_STATES",
    "PROCESS_END_STATES",
    "SlurmError",
    "SlurmJob",
    "SlurmNodeNotFound",
    "cancel",
    "excluded_nodes",
    "jobs",
    "node_enable",
    "node_host_name",
    "nodes_failed_start",
    "nodes_started",
    "reconcile_jobs",
    "submit",
    "submit_queued_runs",
]
