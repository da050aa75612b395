"""Slurm as a resource manager: the master's side of a ``slurm`` resource pool.

``poll()`` (the master worker's ``headway.slurm_pools`` task, every
``HEADWAY_SLURM_POLL_SECONDS``) submits each queued run of a slurm pool as one batch job
(``_submit``; the script: ``_script``) and keeps runs and jobs in step (``_reconcile``), keeping
its jobs off nodes where runs keep failing to start (``_nodes``), with
Slurm's own client commands (``_commands``). Slurm places the jobs (gang allocation, fair share,
backfill, time limits, node failures); inside a job, ``workers.slurm_node`` runs the run over
REST as a host agent does.
"""

from __future__ import annotations

from django.conf import settings

from registry.slurm._commands import (
    ACTIVE_STATES,
    INFRASTRUCTURE_END_STATES,
    PROCESS_END_STATES,
    SlurmError,
    SlurmJob,
    cancel,
    jobs,
    submit,
)
from registry.slurm._nodes import (
    SlurmNodeNotFound,
    excluded_nodes,
    node_enable,
    nodes_failed_start,
    nodes_started,
)
from registry.slurm._reconcile import reconcile_jobs
from registry.slurm._submit import node_host_name, submit_queued_runs


def poll(namespace: str | None = None) -> list[int]:
    """Reconcile the jobs, then submit the queued runs of this registry's slurm pools
    (``namespace``: default ``HEADWAY_QUEUE``); return the job ids submitted. Does nothing
    without a slurm pool in ``HEADWAY_RESOURCE_POOLS``.

    Raises:
        SlurmError: squeue could not be read (a refused sbatch only says so on its trial).
    """
    from registry import lifecycle
    from registry.pools import resource_pools

    pools = {pool.name: pool for pool in resource_pools().slurm_pools()}
    if not pools:
        return []
    namespace = namespace or settings.CELERY_TASK_DEFAULT_QUEUE
    reconcile_jobs(namespace, pools, lifecycle.trial_run_exited)
    return submit_queued_runs(namespace, pools)


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
    "poll",
    "reconcile_jobs",
    "submit",
    "submit_queued_runs",
]
