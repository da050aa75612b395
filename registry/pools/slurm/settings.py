"""The settings of a ``type: slurm`` pool in the admin's pools file.

They are the admin's alone: an experiment config has no sbatch field, so users cannot add job
options (docs/decisions/scheduling.md, "Slurm pools"). Every value is checked when the file is
read, so a typo stops the master at start-up instead of failing every job at submission::

    - name: hpc
      type: slurm
      partition: debug
      account: ml-team
      qos: normal
      time_limit: "1-00:00:00"     # Slurm's forms: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
      gres_per_slot: gpu:1          # per slot; unset on CPU clusters
      slots_per_node: 4             # a trial of 8 slots: 2 nodes x 4 tasks (unset: one node)
      preempt_grace_seconds: 120    # --signal=USR1@120: the checkpoint's time before the limit
      sbatch_options: ["--constraint=a100", "--exclusive"]
      python: /opt/headway/bin/python   # on the compute nodes (default: the master's)
      master_url: http://login-1:8000   # how the nodes reach the master (default: HEADWAY_MASTER_URL)
      work_dir: /scratch/headway        # on the nodes (default: HEADWAY_WORK_DIR)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from registry.pools import ResourcePool

# Slurm's time formats (sbatch --time): "minutes", "minutes:seconds", "hours:minutes:seconds",
# "days-hours", "days-hours:minutes", "days-hours:minutes:seconds"; or UNLIMITED.
_TIME = re.compile(r"\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}(:\d{1,2})?")
# gres as sbatch takes it per slot: name[:type]:count (gpu:1, gpu:a100:1).
_GRES = re.compile(r"[a-z][a-z0-9_]*(:[A-Za-z0-9_.-]+)?:[1-9][0-9]*")
# A partition, account or QOS name: Slurm's names have no spaces, commas or shell characters.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Options Headway sets itself (from the run and the fields above): naming one in
# sbatch_options would contradict them, so it is refused with the field to use instead.
RESERVED_OPTIONS = {
    "--job-name": "set by Headway",
    "-J": "set by Headway",
    "--nodes": "set from slots_per_trial and slots_per_node",
    "-N": "set from slots_per_trial and slots_per_node",
    "--ntasks": "set from slots_per_trial",
    "-n": "set from slots_per_trial",
    "--ntasks-per-node": "set from slots_per_node",
    "--gres": "use gres_per_slot",
    "--gpus": "use gres_per_slot",
    "--signal": "use preempt_grace_seconds",
    "--output": "set by Headway (under work_dir)",
    "-o": "set by Headway (under work_dir)",
    "--error": "set by Headway (under work_dir)",
    "-e": "set by Headway (under work_dir)",
    "--export": "set by Headway (the job gets only Headway's variables)",
    "--partition": "use partition",
    "-p": "use partition",
    "--account": "use account",
    "-A": "use account",
    "--qos": "use qos",
    "-q": "use qos",
    "--time": "use time_limit",
    "-t": "use time_limit",
    "--requeue": "Headway re-queues runs itself",
    "--array": "one job is one run",
    "-a": "one job is one run",
    "--wrap": "the script is Headway's",
    "--chdir": "set by Headway",
    "-D": "set by Headway",
    "--uid": "the job runs as the master's account",
    "--gid": "the job runs as the master's account",
}


class SlurmPoolSettings(BaseModel):
    """A slurm pool's job settings (all optional; see the module's example).

    Attributes:
        partition, account, qos (str | None): ``--partition``, ``--account``, ``--qos``.
        time_limit (str | None): ``--time`` in Slurm's format; the job gets ``USR1``
            ``preempt_grace_seconds`` before it and checkpoints (Headway's preemption).
        gres_per_slot (str | None): generic resources one slot needs (``gpu:1``); the job asks
            for that many times the slots on each node (``--gres``). None: CPU slots.
        slots_per_node (int | None): slots a node gives a trial; a trial of more spans
            ``slots_per_trial / slots_per_node`` nodes (which must divide). None: one node.
        preempt_grace_seconds (int): seconds before the time limit that ``USR1`` arrives.
        sbatch_options (list[str]): more ``sbatch`` options, each ``--name[=value]`` (the admin's
            only: see ``RESERVED_OPTIONS`` for those Headway sets itself).
        python (str | None): the Python on the compute nodes with Headway installed.
        master_url (str | None): the master's URL as the compute nodes reach it.
        work_dir (str | None): the runs' working directories and the jobs' output on the nodes.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: str | None = None
    gres_per_slot: str | None = None
    slots_per_node: Annotated[int, Field(ge=1, le=1024)] | None = None
    preempt_grace_seconds: Annotated[int, Field(ge=1, le=86400)] = 120
    sbatch_options: Annotated[list[str], Field(max_length=32)] = []
    python: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    master_url: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    work_dir: Annotated[str, Field(min_length=1, max_length=500)] | None = None

    @field_validator("partition", "account", "qos")
    @classmethod
    def _check_slurm_name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a Slurm name (letters, digits, '.', '_', '-')")
        return value

    @field_validator("time_limit")
    @classmethod
    def _check_time(cls, value: str | None) -> str | None:
        if value is not None and value != "UNLIMITED" and not _TIME.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
                "D-HH:MM:SS or UNLIMITED)"
            )
        return value

    @field_validator("gres_per_slot")
    @classmethod
    def _check_gres(cls, value: str | None) -> str | None:
        if value is not None and not _GRES.fullmatch(value):
            raise ValueError(f"{value!r} is not a gres (name[:type]:count, e.g. gpu:1)")
        return value

    @field_validator("sbatch_options")
    @classmethod
    def _check_options(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value.startswith("-") or any(c in value for c in "\n\r\0"):
                raise ValueError(f"{value!r} is not an sbatch option (--name or --name=value)")
            name = value.split("=", 1)[0]
            why = RESERVED_OPTIONS.get(name)
            if why is not None:
                raise ValueError(f"{name} cannot be given here: {why}")
        return values

    @field_validator("python", "work_dir")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or any(c in value for c in "\n\r\0")):
            raise ValueError(f"{value!r} is not an absolute path")
        return value

    @field_validator("master_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s'\"\\]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    def nodes_for(self, slots: int) -> tuple[int, int] | None:
        """``(nodes, slots per node)`` for a trial of ``slots``; None when ``slots_per_node``
        does not divide it (the run cannot be submitted; its trial says why)."""
        per_node = self.slots_per_node
        if per_node is None or slots <= per_node:
            return 1, slots
        if slots % per_node:
            return None
        return slots // per_node, per_node


def slurm_settings(pool: ResourcePool) -> SlurmPoolSettings:
    """The slurm settings of ``pool`` (a pool of type slurm; its ``settings`` as parsed).

    Raises:
        TypeError: ``pool`` is not of type slurm.
    """
    if not isinstance(pool.settings, SlurmPoolSettings):
        raise TypeError(f"pool {pool.name!r} is of type {pool.type}, not slurm")
    return pool.settings
