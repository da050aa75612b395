"""Slurm as a resource manager (issue #22): the master's side of a ``slurm`` resource pool.

``registry.slurm`` submits runs as batch jobs and reads their state with Slurm's own client
commands (:mod:`registry.slurm._commands`); Slurm places them (gang allocation, fair share,
backfill, time limits, node failures).
"""

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

__all__ = [
    "ACTIVE_STATES",
    "INFRASTRUCTURE_END_STATES",
    "PROCESS_END_STATES",
    "SlurmError",
    "SlurmJob",
    "cancel",
    "jobs",
    "submit",
]
