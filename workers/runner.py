"""Runs one trial run on this host: claim, unpack, launch, stream logs, report the exit.

Steps:
Every step talks to the master over REST with the host token (``workers.link``); the task
message carries only ids, and the host asks for the run's token (only for runs placed on it).

1. Claim the run (a conditional UPDATE on the master; a duplicate or redelivered task stops
   here), then fetch its launch spec, its token and the model definition.
2. Unpack the model definition into a fresh ``<work>/trial-<id>-run-<n>/code``.
3. Write the cluster-info JSON the SDK reads and start the entrypoint as a subprocess in its
   own session (process group), with ``HEADWAY_*`` variables and the run's trial-scoped token
   (``workers.launch``, ``workers.trial_start``). A ``module:Class`` entrypoint runs under ``headway.exec.harness``;
   when the run holds more than one slot (plus the shares of a run over several hosts) it is
   wrapped in ``headway.launch.torch_distributed --trial module:Class`` (one process per
   slot). A shell command runs as given: it names the launcher itself, as in Determined.
4. Send stdout/stderr to the trial's log in batches, heartbeat while it runs
   (``workers.run_loop``). A run held by this host alone writes its output to a file the
   agent tails, so a restarted agent can re-attach it (``workers.reattach``).
5. Report the exit code; the master's lifecycle decides what happens next.

A run over several hosts (``workers.distributed``): the chief host's worker does the above;
every other host's worker runs its share (``run_trial_share``): claim the share, wait for the
chief's rendezvous address, then steps 2-4 for its own ranks, and record the share's exit.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from headway.client import wire
from headway.exec import procs
from workers import (
    agent_state,
    distributed,
    leases,
    link,
    outage,
    reattach,
    shared_storage,
    supervision,
    trial_start,
)
from workers.config import settings
from workers.distributed import NodePlan
from workers.run_loop import LogWriter, pump, supervise, supervise_share

logger = logging.getLogger("headway.worker")


class NotStarted(Exception):
    """The run's process could not be started on this host (fetching, checking or unpacking its
    model definition, writing its files, ``Popen``): reported as lost before its ranks started,
    which the master re-queues after a back-off and bounds (``max_lost_before_start``)."""


def worker_name() -> str:
    """This worker's name: ``<host name>:<pid>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def claimer() -> str:
    """One claim attempt's name as stored on the run it claims: ``worker_name()`` and a random
    part, so a claim sent again after its answer was lost is recognised as the same one (the
    master answers it True again), while two deliveries of one task to two threads of this
    worker are two claimers (one wins)."""
    return f"{worker_name()}/{uuid.uuid4().hex[:12]}"


def run_trial(trial_id: int, run_id: int) -> int | None:
    """Run ``run_id`` of trial ``trial_id`` to its end; return the exit code.

    None when the run was not claimed, or when it was stopped by this worker's shutdown,
    because its lease ended, or because another host of the run was lost (reported as lost:
    the trial is re-queued, not counted as a restart).
    """
    if supervision.shutting_down.is_set():
        # Delivered during this worker's warm shutdown: leave the run unclaimed; placement
        # gives it to another host (the host was marked stopped), and the shutdown is not held
        # up by a trial that would start only to be preempted.
        logger.info("trial %s run %s not claimed: this worker is shutting down", trial_id, run_id)
        return None
    claimed = time.monotonic()  # the claim starts this host's lease (workers/leases.py)
    if not link.api().run_claim(trial_id, run_id, worker=claimer()).claimed:
        logger.info("trial %s run %s already claimed or no longer runnable", trial_id, run_id)
        return None
    lease = leases.hold(leases.RUN, trial_id, run_id, 0, claimed)
    try:
        return _run_claimed(trial_id, run_id, lease)
    finally:
        leases.release(lease)


def _finish(logs: LogWriter, exit_code: int | None, report: Any, what: str, run_dir: Path) -> None:
    """Send the last log lines, then the exit (``report()``), each across an outage of the
    master up to ``HEADWAY_HEARTBEAT_TIMEOUT_SECONDS`` or the outage tolerance if longer (a
    trial that ended during an outage is reported when the master answers again); clean the
    run's folder after exit 0.
    When the master refuses this host's token (revoked) neither can be sent: said in the
    worker's log, and the master's lost-run reaper ends the run once its lease lapsed."""
    budget = max(settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS, settings.outage_budget())
    try:
        outage.retry_master(logs.flush, budget=budget, what="trial logs")
    except Exception as exc:
        # The exit matters more than the last lines: report it even if they cannot be sent.
        if link.is_refused(exc):
            logger.error("%s: its last log lines not sent: %s", what, link.refusal(exc))
        else:
            logger.exception("%s: could not send the last log lines", what)
    try:
        outage.retry_master(report, budget=budget, what=f"{what} exit")
    except Exception as exc:
        if not link.is_refused(exc):
            raise
        logger.error(
            "%s: exit code %s not reported, left to the master's lost-run reaper: %s",
            what,
            exit_code,
            link.refusal(exc),
        )
        return
    if exit_code == 0 and not os.environ.get("HEADWAY_KEEP_WORKDIRS"):
        shutil.rmtree(run_dir, ignore_errors=True)


def _run_spec(trial_id: int, run_id: int) -> wire.LaunchSpec:
    """The run's launch spec, its experiment config validated on arrival.

    Raises:
        NotStarted: the spec does not validate here (a master newer than this host sent a
            config field this host does not know), naming each bad field: this host cannot
            start the run, another may (re-queued, bounded by ``max_lost_before_start``).
    """
    try:
        return link.api().run_spec(trial_id, run_id)
    except ValidationError as exc:
        raise NotStarted(
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        ) from None


def _run_claimed(trial_id: int, run_id: int, lease: leases.Lease) -> int | None:
    logs = LogWriter(trial_id, run_id)
    run_dir = settings.HEADWAY_WORK_DIR / f"trial-{trial_id}-run-{run_id}"
    exit_code: int | None
    spec: wire.LaunchSpec | None = None
    watch: distributed.ShareWatch | None = None
    reason = ""  # what lost the run, for its trial's message (registry.lifecycle)
    host = settings.HEADWAY_HOST_NAME
    try:
        spec = _run_spec(trial_id, run_id)
        watch = distributed.ShareWatch(spec)
        node = distributed.chief_plan(spec, shared_storage.marker_writer(spec))
        exit_code = _launch_and_wait(spec, run_dir, logs, node, watch=watch, lease=lease)
    except NotStarted as exc:
        # The host could not start it: an infrastructure failure, bounded on the master.
        logger.exception("trial %s run %s could not be started", trial_id, run_id)
        logs.add(f"[headway] could not launch the trial: {exc}")
        exit_code, reason = None, f"host {host} could not start run {run_id}: {exc}"
    except Exception as exc:  # a failure to launch is the trial's failure, not the worker's
        if link.is_refused(exc) or link.is_master_unavailable(exc):
            # The master refused this host or is away: not the trial's fault.
            logger.exception("trial %s run %s: the master could not be reached", trial_id, run_id)
            logs.add(f"[headway] could not launch the trial: {exc}")
            exit_code = None
        else:
            logger.exception("trial %s run %s could not be launched", trial_id, run_id)
            logs.add(f"[headway] could not launch the trial: {exc}")
            exit_code = 1
    if spec is not None:
        shared_storage.forget(spec)  # the other hosts read the marker before their ranks started
    return report_exit(trial_id, run_id, lease, logs, exit_code, reason, watch, run_dir)


def report_exit(
    trial_id: int,
    run_id: int,
    lease: leases.Lease,
    logs: LogWriter,
    exit_code: int | None,
    reason: str,
    watch: distributed.ShareWatch | None,
    run_dir: Path,
) -> int | None:
    """Report the exit of a run this agent started or re-attached (``workers.reattach``): a
    code from a stop this host made (its shutdown, its lease) is reported as lost (None, with
    ``reason`` for the trial's message); return the code reported."""
    host = settings.HEADWAY_HOST_NAME
    if exit_code != 0 and supervision.shutting_down.is_set():
        # Stopped because this worker is going away: the trial's fault is not in it.
        logs.add(f"[headway] run {run_id} stopped by the worker's shutdown (code {exit_code})")
        exit_code, reason = None, f"host {host} shut down"
    if lease.expired:
        # Stopped by this host for want of a lease: an infrastructure failure, not the trial's.
        logs.add(f"[headway] run {run_id} stopped: {lease.expired} (code {exit_code})")
        exit_code, reason = None, f"host {host} lost its lease"
    elif watch is not None:
        exit_code = watch.final_exit_code(exit_code, logs.add)
        if exit_code is None and watch.problem is not None:
            reason = reason or watch.problem[1]
    logs.add(f"[headway] run {run_id} exited with code {exit_code}")
    code = exit_code

    def report() -> None:
        link.api().run_exit(trial_id, run_id, code, reason=reason)

    _finish(logs, exit_code, report, f"trial {trial_id} run {run_id}", run_dir)
    agent_state.remove_run(trial_id, run_id)
    return exit_code


def run_trial_share(trial_id: int, run_id: int, node_rank: int) -> int | None:
    """Run this host's share ``node_rank`` of a run over several hosts; return its exit code.

    None when the share was not claimed (already claimed, or its run ended), or when the run
    ended before the chief published its rendezvous address.
    """
    if supervision.shutting_down.is_set():
        logger.info(
            "trial %s run %s node %s not claimed: shutting down", trial_id, run_id, node_rank
        )
        return None
    claimed = time.monotonic()
    if not link.api().share_claim(trial_id, run_id, node_rank, worker=claimer()).claimed:
        logger.info("trial %s run %s node %s: already claimed or over", trial_id, run_id, node_rank)
        return None
    lease = leases.hold(leases.SHARE, trial_id, run_id, node_rank, claimed)
    try:
        return _run_claimed_share(trial_id, run_id, node_rank, lease)
    finally:
        leases.release(lease)


def _run_claimed_share(
    trial_id: int, run_id: int, node_rank: int, lease: leases.Lease
) -> int | None:
    logs = LogWriter(trial_id, run_id, node_rank)
    run_dir = settings.HEADWAY_WORK_DIR / f"trial-{trial_id}-run-{run_id}-node-{node_rank}"
    exit_code: int | None

    def report() -> None:
        link.api().share_exit(trial_id, run_id, node_rank, exit_code)

    what = f"trial {trial_id} run {run_id} node {node_rank}"
    try:
        spec = link.api().share_spec(trial_id, run_id, node_rank)
        node = distributed.wait_for_rendezvous(spec)
        if node is None:
            logs.add(f"[headway] run {run_id} node {node_rank}: the run ended before it started")
            exit_code = None
            _finish(logs, exit_code, report, what, run_dir)
            return None
        shared_storage.check_share(spec, node)
        exit_code = _launch_and_wait(spec, run_dir, logs, node, lease=lease)
    except shared_storage.SharedStorageRefused as exc:
        logs.add(f"[headway] {exc}")
        exit_code = 1
    except Exception as exc:
        logger.exception("%s could not be launched", what)
        logs.add(f"[headway] node {node_rank} could not launch: {exc}")
        refused = link.is_refused(exc) or link.is_master_unavailable(exc)
        exit_code = None if refused else 1
    if exit_code != 0 and supervision.shutting_down.is_set():
        exit_code = None
    if lease.expired:
        logs.add(f"[headway] node {node_rank} stopped: {lease.expired} (code {exit_code})")
        exit_code = None
    logs.add(f"[headway] run {run_id} node {node_rank} exited with code {exit_code}")
    _finish(logs, exit_code, report, what, run_dir)
    return exit_code


def _launch_and_wait(
    spec: wire.LaunchSpec,
    run_dir: Path,
    logs: LogWriter,
    node: NodePlan | None = None,
    *,
    watch: distributed.ShareWatch | None = None,
    lease: leases.Lease | None = None,
) -> int:
    node = node or NodePlan(total_slots=max(spec.slots, 1))
    trial_id, run_id, node_rank = spec.trial_id, spec.run_id, spec.node_rank
    try:
        process = trial_start.start(spec, run_dir, logs, node, lease)
    except Exception as exc:
        if link.is_refused(exc) or link.is_master_unavailable(exc):
            raise
        raise NotStarted(f"{type(exc).__name__}: {exc}") from exc
    api = link.api()
    # The process runs now: an outage of the master at this moment must not orphan it.
    outage.retry_master(
        (lambda: api.run_running(trial_id, run_id))
        if node_rank == 0
        else (lambda: api.share_running(trial_id, run_id, node_rank)),
        budget=max(settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS, settings.outage_budget()),
        what=f"trial {trial_id} run {run_id} running",
    )
    lines: queue.Queue[object] = queue.Queue()
    if process.stdout is not None:
        threading.Thread(target=pump, args=(process.stdout, lines), daemon=True).start()
    else:  # a run a restarted agent may re-attach: its output goes to a file (workers.reattach)
        agent_state.add_run(
            agent_state.RunEntry(
                trial_id, run_id, process.pid, procs.process_start(process.pid) or 0, str(run_dir)
            )
        )
        logs.on_delivered = lambda offset: agent_state.delivered(trial_id, run_id, offset)
        threading.Thread(
            target=reattach.tail,
            args=(run_dir / agent_state.OUTPUT, 0, lambda: process.poll() is not None, lines),
            daemon=True,
        ).start()
    killer = supervision.ProcessGroupKiller(process, settings.HEADWAY_KILL_GRACE_SECONDS)
    supervision.register(trial_id, run_id, killer, node_rank)
    if lease is not None:
        leases.attach(lease, killer, logs.add)
    try:
        if node_rank == 0:
            supervise(spec, killer, lines, logs, watch=watch, lease=lease)
        else:
            supervise_share(spec, killer, lines, logs, lease=lease)
    finally:
        supervision.unregister(trial_id, run_id, node_rank)
    return process.wait()
