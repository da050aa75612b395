"""The batch script of a run's Slurm job, from its pool's settings and Headway's alone.

One job per run: ``slots_per_trial`` becomes ``nodes x ntasks-per-node`` tasks (with ``--gres``
per node where a slot is a GPU), and one ``srun`` step starts one ``python -m
workers.slurm_node`` per node, which runs that node's part of the run as a host agent does
(claim, launch, logs, heartbeats, exit; node 0 is the rendezvous). Slurm sends ``USR1``
``preempt_grace_seconds`` before the time limit (``--signal``), which the node processes turn
into Headway's preemption (checkpoint, exit, resume later).

The job gets Headway's variables only (``--export=NONE``, then ``SLURM_EXPORT_ENV=ALL`` so the
step inherits them): the master's own environment (database URL, secret key) never reaches a
compute node. The host keys are in the script, which Slurm shows to the job's owner and admins
only (docs/deployment.md, "Slurm pools").
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from registry.pools.slurm.settings import SlurmPoolSettings


@dataclass(frozen=True)
class JobLayout:
    """How a run's slots map onto a job.

    Attributes:
        nodes (int): nodes the job spans (one ``workers.slurm_node`` each).
        slots_per_node (int): tasks (slots) on each node.
    """

    nodes: int
    slots_per_node: int


def job_name(namespace: str, trial_id: int, run_id: int) -> str:
    """``headway-<namespace>-t<trial>-r<run>``: what ``squeue`` shows (Slurm cuts names at 200)."""
    return f"headway-{namespace}-t{trial_id}-r{run_id}"[:200]


def _gres(per_slot: str, slots: int) -> str:
    # "gpu:1" per slot, 4 slots a node -> "gpu:4"; "gpu:a100:2" -> "gpu:a100:8".
    head, _, count = per_slot.rpartition(":")
    return f"{head}:{int(count) * slots}"


def job_script(
    settings: SlurmPoolSettings,
    layout: JobLayout,
    *,
    name: str,
    python: str,
    work_dir: str,
    environment: Mapping[str, str],
    exclude: Sequence[str] = (),
) -> str:
    """The whole batch script (``#!/bin/bash`` and ``#SBATCH`` lines) for one run's job.

    Arguments:
        settings: the pool's settings (partition, gres, time limit, extra options...).
        layout: nodes and slots per node.
        name: the job's name (``job_name``).
        python: the Python on the compute nodes that has Headway installed.
        work_dir: the runs' directory on the nodes; the job's output goes to
            ``<work_dir>/slurm-<job id>.out``.
        environment: the variables the node processes get (``HEADWAY_*``; PATH), exported by
            the script itself.
        exclude: nodes the job must not run on (the pool's nodes Headway excluded after
            failed starts: ``registry.pools.slurm._nodes``), one ``--exclude`` with those of an
            ``--exclude=`` in the pool's ``sbatch_options`` (sbatch keeps only its last one).
    """
    options = [
        f"--job-name={name}",
        f"--nodes={layout.nodes}",
        f"--ntasks-per-node={layout.slots_per_node}",
        f"--signal=USR1@{settings.preempt_grace_seconds}",
        "--no-requeue",  # a lost run is re-queued by Headway, as a new run and job
        "--export=NONE",
        f"--output={PurePosixPath(work_dir) / 'slurm-%j.out'}",
    ]
    if settings.gres_per_slot:
        options.append(f"--gres={_gres(settings.gres_per_slot, layout.slots_per_node)}")
    for flag, value in (
        ("--partition", settings.partition),
        ("--account", settings.account),
        ("--qos", settings.qos),
        ("--time", settings.time_limit),
    ):
        if value is not None:
            options.append(f"{flag}={value}")
    own_excludes = [o for o in settings.sbatch_options if o.startswith("--exclude=")]
    options += [o for o in settings.sbatch_options if o not in own_excludes]
    excluded = [o.split("=", 1)[1] for o in own_excludes] + list(exclude)
    if excluded:
        options.append(f"--exclude={','.join(excluded)}")
    lines = ["#!/bin/bash", f"# {name}: written by the Headway master for one run; not a template."]
    lines += [f"#SBATCH {option}" for option in options]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(environment.items())]
    lines += [
        "export SLURM_EXPORT_ENV=ALL",  # the step inherits the variables above
        f"mkdir -p {shlex.quote(work_dir)}",
        _srun(layout, python),
    ]
    return "\n".join(lines) + "\n"


def _srun(layout: JobLayout, python: str) -> str:
    # One process per node, holding that node's tasks' CPUs (the ranks it starts use them);
    # --kill-on-bad-exit=0: a node whose run failed reports it, the others are told by the master.
    argv: Sequence[str] = [
        "srun",
        f"--nodes={layout.nodes}",
        f"--ntasks={layout.nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={layout.slots_per_node}",
        "--kill-on-bad-exit=0",
        python,
        "-m",
        "workers.slurm_node",
    ]
    return "exec " + " ".join(shlex.quote(part) for part in argv)
