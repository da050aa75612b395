"""Keeping each run's state and its Ray job's state in step.

Every ``HEADWAY_RAY_POLL_SECONDS`` the master's worker reads, per ray pool, the cluster's alive
nodes (its capacity: ``RayPoolState``) and, per unfinished job, its status (Jobs API) and its
placement group (State API). Per job (``decide``):

- running, its placement group waiting: the trial says why, in Ray's words (``waiting in Ray:
  job ... placement group of 2 bundles PENDING (NO_RESOURCES)``);
- active while its run was closed before it started, long after its run's exit, or while the
  run is being killed: ``stop_job`` (pause goes through ``should_preempt()`` as on agents and
  the job ends by itself);
- ended while its run had not: stopped, a Ray node or actor lost (the driver's exit status
  ``LOST_EXIT``), the supervisor gone, or the job unknown to Ray are an infrastructure failure:
  the run is lost (re-queued, not counted against ``max_restarts``); a driver that failed
  otherwise after the ranks started is that exit code, counted as a failure; Ray's message
  goes to the trial's log;
- ended before its run's ranks reported started: the run is lost before start (re-queued after
  a back-off, bounded by ``max_lost_before_start``: ``registry.lifecycle._lost``);
- ended, its run too: its hosts are removed and their tokens revoked (``cleaned``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from registry.models import HostToken, RunState, StopReason, TrialLog, TrialRun
from registry.pools import ResourcePool
from registry.pools.ray import _client
from registry.pools.ray._submit import say
from registry.pools.ray.models import RayJob, RayPoolState
from registry.pools.ray.settings import ray_settings

logger = logging.getLogger("headway.ray")

# A job Ray does not list this long after its submission is gone (the head restarted without
# its GCS state); a just-submitted job is always listed.
VANISHED_AFTER = timedelta(seconds=60)

# Lines of Ray's message of a job that ended before its run started, copied to the trial's log.
OUTPUT_TAIL_LINES = 30

RunExited = Callable[..., object]


class Action(enum.StrEnum):
    """What a reconciliation does with one job (``decide``)."""

    NOTHING = "nothing"
    WAITING = "waiting"  # say why it waits
    STOP = "stop"  # stop_job
    LOST_BEFORE_START = "lost_before_start"
    LOST = "lost"
    FAILED = "failed"  # the driver's exit, counted
    CLEAN = "clean"  # the run ended already: remove the hosts


def decide(
    seen: _client.RayJobSeen | None,
    *,
    run_state: str,
    stop_requested: str,
    exited_long_ago: bool,
    group: _client.GroupSeen | None,
    age: timedelta,
) -> Action:
    """What to do with a job Ray reports as ``seen`` (None: unknown to Ray) whose run is in
    ``run_state`` (``RunState``), ``stop_requested`` (``StopReason`` or ""), exited longer
    than the pool's ``stop_after_exit_seconds`` ago or not, its placement group ``group``
    (None: not listed), submitted ``age`` ago."""
    if seen is None and age < VANISHED_AFTER:
        return Action.NOTHING
    if seen is not None and seen.active:
        if run_state == RunState.EXITED and (exited_long_ago or _never_placed(group)):
            return Action.STOP  # closed before it started, or it outlived its run's exit
        if stop_requested == StopReason.KILL:
            return Action.STOP
        if run_state == RunState.QUEUED:
            return Action.WAITING
        return Action.NOTHING
    if run_state in (RunState.QUEUED, RunState.STARTING):
        return Action.LOST_BEFORE_START
    if run_state != RunState.EXITED:
        if seen is None or seen.ended_by_infrastructure:
            return Action.LOST
        return Action.FAILED
    return Action.CLEAN


def _never_placed(group: _client.GroupSeen | None) -> bool:
    # A group REMOVED is one whose driver is ending after its run: it ends by itself.
    return group is None or group.state == "PENDING"


def reconcile_jobs(namespace: str, pools: dict[str, ResourcePool], run_exited: RunExited) -> None:
    """One reconciliation of ``namespace``'s ray pools and unfinished jobs (see module).

    ``run_exited`` is ``registry.lifecycle.trial_run_exited`` (passed in: this package is
    below the lifecycle). A pool whose cluster does not answer is recorded so
    (``RayPoolState.error``) and its jobs are left as they are: nothing is concluded from
    silence.
    """
    unfinished = list(
        RayJob.objects.unfinished()
        .filter(run__namespace=namespace, pool__in=list(pools))
        .exclude(state="SUBMITTED")
        .select_related("run")
    )
    for name, pool in pools.items():
        ours = [job for job in unfinished if job.pool == name]
        try:
            _reconcile_pool(namespace, pool, ours, run_exited)
        except _client.RayError as exc:
            logger.warning("Ray pool %s: %s", name, exc)
            RayPoolState.objects.update_or_create(
                namespace=namespace,
                pool=name,
                defaults={"error": str(exc)[:500], "seen_at": timezone.now()},
            )


def _reconcile_pool(
    namespace: str, pool: ResourcePool, jobs: list[RayJob], run_exited: RunExited
) -> None:
    options = ray_settings(pool)
    alive = _client.nodes(options.address)
    RayPoolState.objects.update_or_create(
        namespace=namespace,
        pool=pool.name,
        defaults={
            "nodes": len(alive),
            "slots": sum(options.slots_of(resources) for _, resources in alive.values()),
            "error": "",
            "seen_at": timezone.now(),
        },
    )
    if not jobs:
        return
    groups = _client.groups(options.address, [_client.group_name(j.submission_id) for j in jobs])
    now = timezone.now()
    linger = timedelta(seconds=options.stop_after_exit_seconds)
    for job in jobs:
        seen = _client.job(options.address, job.submission_id)
        group = groups.get(_client.group_name(job.submission_id))
        run = (
            TrialRun.objects.filter(id=job.run_id)
            .values("state", "stop_requested", "ended_at")
            .first()
        )
        if run is None:
            continue
        action = decide(
            seen,
            run_state=run["state"],
            stop_requested=run["stop_requested"] or "",
            exited_long_ago=_before(run["ended_at"], linger),
            group=group,
            age=now - job.submitted_at,
        )
        if seen is not None or action is not Action.NOTHING:  # not yet listed: nothing to copy
            _record(job, seen, group, alive)
        _act(action, job, seen, group, options.address, run_exited)


def _before(ended_at: datetime | None, age: timedelta) -> bool:
    return ended_at is not None and timezone.now() - ended_at > age


def _record(
    job: RayJob,
    seen: _client.RayJobSeen | None,
    group: _client.GroupSeen | None,
    alive: dict[str, tuple[str, dict[str, float]]],
) -> None:
    """Copy Ray's view of the job to its row (state, Ray's reason, its bundles' nodes)."""
    state, reason = ("GONE", "no longer listed by Ray") if seen is None else (seen.status, "")
    if seen is not None and seen.status == "RUNNING" and group is not None:
        if group.state in ("PENDING", "RESCHEDULING"):
            state = "PLACING"
            reason = f"placement group {group.state} ({group.scheduling_state})"
    elif seen is not None and not seen.active:
        reason = seen.message
    nodes = job.nodes
    placed = [node for node in (group.nodes if group is not None else ()) if node]
    if placed and all(node in alive for node in placed):  # a lost node keeps its address
        nodes = ",".join(alive[node][0] for node in placed)
    exit_code = seen.exit_code if seen is not None else None
    if (job.state, job.reason, job.nodes, job.exit_code) != (state, reason[:500], nodes, exit_code):
        job.state, job.reason, job.nodes, job.exit_code = state, reason[:500], nodes, exit_code
        if seen is None or not seen.active:
            job.ended_at = job.ended_at or timezone.now()
        job.save(update_fields=["state", "reason", "nodes", "exit_code", "ended_at"])


def _act(
    action: Action,
    job: RayJob,
    seen: _client.RayJobSeen | None,
    group: _client.GroupSeen | None,
    address: str,
    run_exited: RunExited,
) -> None:
    run = job.run
    if action is Action.WAITING:
        why = (
            f"placement group of {len(group.nodes)} bundle(s) {group.state} "
            f"({group.scheduling_state})"
            if group is not None and group.state != "CREATED"
            else f"{seen.status if seen else 'PENDING'}"
        )
        say(run.pk, f"waiting in Ray: job {job.submission_id} {why}")
    elif action is Action.STOP:
        logger.info("Ray job %s: its run ended or is being killed; stop_job", job.submission_id)
        _client.stop(address, job.submission_id)
    elif action is Action.LOST_BEFORE_START or action is Action.LOST:
        why = f"Ray job {job.submission_id} ended {job.state}{_message(seen)}"
        if action is Action.LOST_BEFORE_START and seen is not None and seen.message:
            # Why a job never started its ranks (a broken runtime environment, a driver that
            # cannot import Headway) is in Ray's message: the trial's failure box shows it.
            TrialLog.objects.bulk_create(
                TrialLog(trial_id=run.trial_id, run_id=run.run_id, message=f"[ray] {line}")
                for line in seen.message.splitlines()[-OUTPUT_TAIL_LINES:]
            )
        run_exited(trial_id=run.trial_id, run_id=run.run_id, exit_code=None, reason=why)
        _clean(job)
    elif action is Action.FAILED:
        assert seen is not None
        code = seen.exit_code or 1
        TrialLog.objects.create(
            trial_id=run.trial_id,
            run_id=run.run_id,
            message=f"[headway] Ray job {job.submission_id} ended {seen.status} (driver exit "
            f"code {seen.exit_code}) before the run reported its exit: counted as exit code "
            f"{code}{_message(seen)}",
        )
        run_exited(trial_id=run.trial_id, run_id=run.run_id, exit_code=code)
        _clean(job)
    elif action is Action.CLEAN:
        _clean(job)


def _message(seen: _client.RayJobSeen | None) -> str:
    if seen is None or not seen.message:
        return ""
    return f": {seen.message.strip().splitlines()[-1][:300]}"


def _clean(job: RayJob) -> None:
    """The job ended and its run too: its hosts go and their tokens are revoked."""
    with transaction.atomic():
        names = list(job.hosts.values_list("name", flat=True))
        HostToken.objects.live().filter(name__in=names).update(revoked_at=timezone.now())
        job.hosts.all().delete()
        job.cleaned = True
        job.save(update_fields=["cleaned"])
