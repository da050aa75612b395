"""Slurm's own commands, as the master calls them: ``sbatch``, ``squeue --json``, ``scancel``,
``scontrol show hostnames``.

Headway drives Slurm through its client commands rather than ``slurmrestd`` (docs/decisions/scheduling.md,
"Slurm pools"): they are in Debian's ``slurm-wlm`` and on every login node, need no JWT set-up,
and ``squeue --json`` (Slurm >= 21.08) gives job state in a stable structure. Ended jobs are
read from ``squeue -t all``, which lists them for ``MinJobAge`` seconds after they end (no
accounting database needed; ``sacct`` is not used).

Every call has a timeout and raises :class:`SlurmError` with the command's own message, so a
controller that cannot reach ``slurmctld`` says why instead of hanging.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Seconds a Slurm client command may take before the call gives up (slurmctld down or slow).
COMMAND_TIMEOUT_S = 30.0

# Job states (Slurm's ``JOB_STATE_*`` names, squeue's ``job_state``), by what they mean to a run.
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}
)
# Ended by Slurm or the machines, not by the trial's code: an infrastructure failure.
INFRASTRUCTURE_END_STATES = frozenset(
    {"CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED"}
)
# Ended by the job's own processes: its exit code says how.
PROCESS_END_STATES = frozenset({"COMPLETED", "FAILED", "OUT_OF_MEMORY"})


class SlurmError(RuntimeError):
    """A Slurm command failed, timed out or is not installed; the message is Slurm's own."""


@dataclass(frozen=True)
class SlurmJob:
    """One job as ``squeue --json`` reports it.

    Attributes:
        job_id (int): Slurm's job id.
        name (str): the job's name (``--job-name``).
        state (str): the base job state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``TIMEOUT``...).
        reason (str): why it waits or ended (``Resources``, ``Priority``, ``NonZeroExitCode``...;
            ``None`` when there is none).
        exit_code (int | None): the batch script's exit status once ended (0-255), None before.
        signal (int | None): the signal that ended the batch script, if one did.
        nodes (str): the allocated node list in Slurm's compressed form (``node[1-2]``).
    """

    job_id: int
    name: str
    state: str
    reason: str
    exit_code: int | None
    signal: int | None
    nodes: str

    @property
    def active(self) -> bool:
        """Whether the job is pending or running (not ended)."""
        return self.state in ACTIVE_STATES

    @property
    def ended_by_infrastructure(self) -> bool:
        """Whether Slurm or a node ended it (cancelled, time limit, node failure, preemption):
        not the trial code's failure, so not counted against ``max_restarts``."""
        return self.state in INFRASTRUCTURE_END_STATES


def _run(
    argv: Sequence[str], *, stdin: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    if shutil.which(argv[0]) is None:
        raise SlurmError(
            f"{argv[0]} is not installed on this host (Slurm's client commands are needed)"
        )
    try:
        done = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SlurmError(f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise SlurmError(f"{argv[0]} failed: {message}")
    return done.stdout


def submit(script: str, *, env: Mapping[str, str] | None = None) -> int:
    """Submit a batch ``script`` (its ``#SBATCH`` lines carry the options) and return the job id.

    Arguments:
        script (str): the whole batch script, starting with ``#!``.
        env (Mapping[str, str] | None): the environment ``sbatch`` runs with, which the job
            inherits (``--export`` default ALL); None: this process's.

    Raises:
        SlurmError: sbatch refused the job (bad partition, account...) or is unreachable.
    """
    out = _run(["sbatch", "--parsable"], stdin=script, env=env).strip()
    # --parsable prints "jobid" or "jobid;cluster".
    try:
        return int(out.split(";", 1)[0])
    except ValueError as exc:
        raise SlurmError(f"sbatch answered {out!r}, not a job id") from exc


def _number(value: Any) -> int | None:
    # squeue --json's integers are plain before Slurm 23.02 and {"set", "infinite", "number"}
    # objects from it on.
    if isinstance(value, dict):
        return int(value["number"]) if value.get("set", True) else None
    return int(value) if value is not None else None


def _parse_job(raw: Mapping[str, Any]) -> SlurmJob:
    state = raw.get("job_state", "")
    if isinstance(state, list):  # Slurm >= 23.02: a list of flags, the base state first
        state = state[0] if state else ""
    exit_code: int | None = None
    signal: int | None = None
    raw_exit = raw.get("exit_code")
    if isinstance(raw_exit, dict):  # Slurm >= 23.02: {"status", "return_code", "signal"}
        exit_code = _number(raw_exit.get("return_code"))
        signal = _number((raw_exit.get("signal") or {}).get("id"))
    elif raw_exit is not None:
        status = int(raw_exit)  # a wait() status: code in the high byte, signal in the low
        exit_code, signal = status >> 8, (status & 0x7F) or None
    ended = state not in ACTIVE_STATES
    return SlurmJob(
        job_id=int(_number(raw["job_id"]) or 0),
        name=str(raw.get("name", "")),
        state=str(state),
        reason=str(raw.get("state_reason", "") or ""),
        exit_code=exit_code if ended else None,
        signal=signal if ended else None,
        nodes=str(raw.get("nodes", "") or ""),
    )


def jobs(job_ids: Iterable[int]) -> dict[int, SlurmJob]:
    """The current state of ``job_ids``, pending, running or recently ended.

    A job missing from the answer is unknown to slurmctld (ended longer than ``MinJobAge`` ago,
    or never existed): the caller decides what that means.

    Raises:
        SlurmError: squeue failed or answered something that is not its JSON.
    """
    ids = sorted({int(i) for i in job_ids})
    if not ids:
        return {}
    out = _run(["squeue", "--json", "--states=all", "--jobs=" + ",".join(map(str, ids))])
    try:
        payload = json.loads(out)
    except json.JSONDecodeError as exc:
        raise SlurmError(f"squeue --json answered something that is not JSON: {exc}") from exc
    found = (_parse_job(raw) for raw in payload.get("jobs", []))
    return {job.job_id: job for job in found if job.job_id in ids}


def cancel(job_id: int, *, signal: str | None = None) -> None:
    """``scancel`` the job; with ``signal`` (e.g. ``"USR1"``), send it to every step and the
    batch script instead of ending the job (``scancel --signal --full``).

    A job that has already ended is not an error (scancel says so and exits 0 or 1 depending
    on the version: both are accepted).

    Raises:
        SlurmError: scancel could not reach slurmctld.
    """
    argv = ["scancel"]
    if signal is not None:
        argv += ["--full", f"--signal={signal}"]
    argv.append(str(int(job_id)))
    try:
        _run(argv)
    except SlurmError as exc:
        if "already completing or completed" in str(exc) or "Invalid job id" in str(exc):
            return
        raise


def hostnames(expression: str) -> list[str]:
    """The node names of a hostlist ``expression`` as squeue reports a job's nodes
    (``node[01-03],gpu7`` -> ``node01``, ``node02``, ``node03``, ``gpu7``), expanded by
    ``scontrol show hostnames`` (Slurm's own parser), or by ``expand_hostlist`` where
    scontrol is not installed or cannot run (e.g. no readable slurm.conf on the master, which
    only needs one to talk to slurmctld); ``[]`` for an empty expression.

    Raises:
        SlurmError: scontrol refused the expression (or, without it, the expression is
            malformed).
    """
    if not expression.strip():
        return []
    if shutil.which("scontrol") is None:
        return expand_hostlist(expression)
    try:
        names = _run(["scontrol", "show", "hostnames", expression]).split()
    except SlurmError:
        # The expansion is pure text: a master whose scontrol cannot load a configuration
        # still knows the grammar, and a malformed expression is refused by the fallback too.
        return expand_hostlist(expression)
    if not names:  # "Invalid hostlist" goes to stderr, with exit status 0
        raise SlurmError(f"scontrol show hostnames could not expand {expression!r}")
    return names


def expand_hostlist(expression: str) -> list[str]:
    """Slurm's hostlist grammar, for a master without ``scontrol``: comma-separated names,
    each with bracketed lists of numbers and ranges whose zero padding is kept
    (``n[01-02,7]`` -> ``n01``, ``n02``, ``n7``; several brackets multiply).

    Raises:
        SlurmError: an unbalanced bracket or a range that is not ``low-high`` numbers.
    """
    names: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(expression + ","):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0 or depth > 1:
            raise SlurmError(f"{expression!r} is not a Slurm hostlist (brackets)")
        if char == "," and depth == 0:
            if expression[start:i]:
                names += _expand_one(expression[start:i], expression)
            start = i + 1
    if depth:
        raise SlurmError(f"{expression!r} is not a Slurm hostlist (brackets)")
    return names


def _expand_one(item: str, expression: str) -> list[str]:
    head, bracket, rest = item.partition("[")
    if not bracket:
        return [item]
    ranges, _, tail = rest.partition("]")
    out: list[str] = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or not (high or low).isdigit() or int(high or low) < int(low):
            raise SlurmError(f"{expression!r} is not a Slurm hostlist (range {part!r})")
        out += [
            f"{head}{number:0{len(low)}d}{name}"
            for number in range(int(low), int(high or low) + 1)
            for name in _expand_one(tail, expression)
        ]
    return out
