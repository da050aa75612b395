"""The Ray cluster as the master reaches it: the dashboard's Jobs API
(``ray.job_submission.JobSubmissionClient``) and State API (``ray.util.state``).

Each run is one Ray *job* (docs/decisions/scheduling.md, "Ray pools"): submitted under a
submission id derived from the run (``submission_id``), so a retried submission never starts a
second job. Every call raises :class:`RayError` with Ray's own message, so a master that cannot
reach the dashboard says why; nothing is concluded from an unanswered call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

# The driver's exit status when a Ray node or an actor of the run was lost (workers.ray_node):
# an infrastructure failure, which re-queues the run without counting it.
LOST_EXIT = 75
# Seconds a State API call may take.
STATE_TIMEOUT_S = 10
# Ray's job statuses by what they mean to a run.
ACTIVE_STATUSES = frozenset({"PENDING", "RUNNING"})
# A job ended by Ray or the admin (stop_job, the supervisor's node gone): not the trial's code.
INFRASTRUCTURE_ERRORS = frozenset(
    {"JOB_SUPERVISOR_ACTOR_DIED", "JOB_SUPERVISOR_ACTOR_START_FAILURE", "RUNTIME_ENV_SETUP_FAILURE"}
)


class RayError(RuntimeError):
    """The Ray cluster refused a request or did not answer; the message is Ray's own."""


@dataclasses.dataclass(frozen=True)
class RayJobSeen:
    """One job as the Jobs API reports it.

    Attributes:
        submission_id (str): the id Headway submitted it under.
        status (str): ``PENDING``, ``RUNNING``, ``STOPPED``, ``SUCCEEDED`` or ``FAILED``.
        message (str): Ray's message (why it failed, was stopped...), cut to 500 characters.
        error_type (str): Ray's error type of a failed job ("" when none).
        exit_code (int | None): the driver's exit status once ended (None when Ray has none).
    """

    submission_id: str
    status: str
    message: str = ""
    error_type: str = ""
    exit_code: int | None = None

    @property
    def active(self) -> bool:
        """Whether the job is pending or running."""
        return self.status in ACTIVE_STATUSES

    @property
    def ended_by_infrastructure(self) -> bool:
        """Whether Ray, a lost node or a stop ended it (not the run's processes): the run is
        lost, re-queued and not counted against ``max_restarts``."""
        return (
            self.status == "STOPPED"
            or self.exit_code == LOST_EXIT
            or self.error_type in INFRASTRUCTURE_ERRORS
        )


@dataclasses.dataclass(frozen=True)
class GroupSeen:
    """A run's placement group as the State API reports it.

    Attributes:
        state (str): ``PENDING``, ``CREATED``, ``RESCHEDULING`` or ``REMOVED``.
        scheduling_state (str): Ray's reason while pending (``NO_RESOURCES``, ``INFEASIBLE``...).
        nodes (tuple[str, ...]): the Ray node ids of its bundles, by bundle ("" unplaced).
    """

    state: str
    scheduling_state: str
    nodes: tuple[str, ...]


def submission_id(namespace: str, run_pk: int) -> str:
    """``headway-<namespace>-r<run pk>``: the job's id, the same on every try for the run."""
    return f"headway-{namespace}-r{run_pk}"


def group_name(submission: str) -> str:
    """The placement group's name in the job (``workers.ray_node`` names it so)."""
    return f"{submission}-pg"


def _client(address: str) -> Any:
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # ConnectionError, RuntimeError: Ray's own message
        raise RayError(f"the Ray dashboard at {address} did not answer: {exc}") from exc


def submit(address: str, submission: str, entrypoint: str, runtime_env: Mapping[str, Any]) -> bool:
    """Submit job ``submission`` running ``entrypoint``; False when a job of that id exists
    already (submitted by an earlier try: nothing is started twice).

    Raises:
        RayError: the dashboard refused the job or is unreachable.
    """
    client = _client(address)
    try:
        client.submit_job(
            entrypoint=entrypoint, submission_id=submission, runtime_env=dict(runtime_env)
        )
    except Exception as exc:
        if "already exists" in str(exc):
            return False
        raise RayError(f"Ray refused job {submission}: {exc}") from exc
    return True


def job(address: str, submission: str) -> RayJobSeen | None:
    """Job ``submission``'s current state; None when Ray does not know it.

    Raises:
        RayError: the dashboard is unreachable or answered an error other than 404.
    """
    client = _client(address)
    try:
        info = client.get_job_info(submission)
    except Exception as exc:
        if "does not exist" in str(exc):
            return None
        raise RayError(f"Ray could not report job {submission}: {exc}") from exc
    return RayJobSeen(
        submission_id=submission,
        status=str(getattr(info.status, "value", info.status)),
        message=(info.message or "")[-500:],
        error_type=str(info.error_type or ""),
        exit_code=info.driver_exit_code,
    )


def stop(address: str, submission: str) -> None:
    """Stop job ``submission`` (Ray sends its driver SIGTERM, then SIGKILL; the driver's
    actors die with it); a job already ended or unknown is not an error.

    Raises:
        RayError: the dashboard is unreachable.
    """
    client = _client(address)
    try:
        client.stop_job(submission)
    except Exception as exc:
        if "does not exist" in str(exc):
            return
        raise RayError(f"Ray could not stop job {submission}: {exc}") from exc


def delete(address: str, submission: str) -> None:
    """Forget ended job ``submission`` (so its id can be submitted again).

    Raises:
        RayError: the dashboard refused (the job is still active) or is unreachable.
    """
    try:
        _client(address).delete_job(submission)
    except Exception as exc:
        raise RayError(f"Ray could not delete job {submission}: {exc}") from exc


def groups(address: str, names: Sequence[str]) -> dict[str, GroupSeen]:
    """The placement groups named ``names`` that Ray lists (the newest of each name).

    Raises:
        RayError: the State API is unreachable.
    """
    from ray.util.state import list_placement_groups

    if not names:
        return {}
    wanted = set(names)
    try:
        # The State API filters by one value per key: the groups are read once, then picked.
        found = list_placement_groups(
            address=address,
            detail=True,
            limit=10000,
            timeout=STATE_TIMEOUT_S,
            raise_on_missing_output=False,
        )
    except Exception as exc:
        raise RayError(f"Ray's State API at {address} did not answer: {exc}") from exc
    out: dict[str, GroupSeen] = {}
    for group in found:
        if group.name not in wanted:
            continue
        seen = GroupSeen(
            state=str(group.state),
            scheduling_state=str((group.stats or {}).get("scheduling_state", "")),
            nodes=tuple(str(b.get("node_id") or "") for b in group.bundles or []),
        )
        # A removed group of an earlier try must not hide the live one of the same name.
        if group.name not in out or out[group.name].state == "REMOVED":
            out[group.name] = seen
    return out


def nodes(address: str) -> dict[str, tuple[str, dict[str, float]]]:
    """The cluster's alive nodes: node id -> (its address, its total resources).

    Raises:
        RayError: the State API is unreachable.
    """
    from ray.util.state import list_nodes

    try:
        found = list_nodes(
            address=address,
            filters=[("state", "=", "ALIVE")],
            detail=True,
            timeout=STATE_TIMEOUT_S,
            raise_on_missing_output=False,
        )
    except Exception as exc:
        raise RayError(f"Ray's State API at {address} did not answer: {exc}") from exc
    return {n.node_id: (n.node_ip, dict(n.resources_total or {})) for n in found}
