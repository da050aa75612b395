"""Runs over several hosts: the chief's view of the other hosts' shares, and each share's state.

A run ganged over several hosts (``registry.scheduling``) has its chief part on the run itself
(node 0, run by ``workers.runner.run_trial``) and one ``RunShare`` per other host (nodes 1..,
run by ``workers.runner.run_trial_share``). The hosts meet through torchrun's static rendezvous
on the chief host; the database carries what torchrun does not:

- the rendezvous address: the chief's worker writes ``"address:port"`` on every share once it
  claimed the run; each share's worker waits for it before starting its ranks;
- failure: a share that exits non-zero, whose lease expired (its host stopped renewing it for
  ``HEADWAY_LEASE_SECONDS`` plus ``HEADWAY_LEASE_MARGIN_SECONDS``: its ranks are gone), whose
  host is lost before it started, or that never starts within
  ``HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS`` makes the chief's worker stop its own ranks (its
  torchrun may otherwise wait in a collective); a run that ended (or is killed) makes every
  share's worker stop its ranks. No rank outlives its run on any host. A lost host makes the
  run lost (re-queued, not counted as a restart), also when the chief's ranks failed first
  because their peers vanished.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from registry import lifecycle
from registry.models import RunShare, RunState, StopReason, TrialRun
from registry.scheduling import lease_expiry
from workers.address import host_address

# Why the chief stops its ranks because of another host; "lost" re-queues without a restart.
FAILED = "failed"
LOST = "lost"


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """Where one host's part of a run sits among the run's hosts.

    Attributes:
        nnodes (int): hosts the run spans (1: a single-host run).
        node_rank (int): this host's index (0: the chief).
        total_slots (int): slots of the whole run (``WORLD_SIZE`` under the launcher).
        chief_addr (str): address of the chief host.
        port (int | None): rendezvous port on the chief host (None with one host).
    """

    nnodes: int = 1
    node_rank: int = 0
    total_slots: int = 1
    chief_addr: str = "127.0.0.1"
    port: int | None = None


def free_port() -> int:
    """A TCP port free on every interface of this host now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def chief_plan(run: TrialRun, prepare: Callable[[str], None] | None = None) -> NodePlan:
    """The chief's ``NodePlan``; for a run over several hosts, publish the rendezvous address
    (this host's advertised address, ``workers.address``, and a free port) to its shares,
    after ``prepare(rendezvous)`` (the shared-storage marker, ``workers.runner``)."""
    shares = list(RunShare.objects.filter(run=run).values_list("slots", flat=True))
    total = (run.slots or 1) + sum(shares)
    if not shares:
        return NodePlan(total_slots=total)
    address, port = host_address(), free_port()
    if prepare is not None:
        prepare(f"{address}:{port}")
    lifecycle.shares_publish_rendezvous(run.id, f"{address}:{port}")
    return NodePlan(
        nnodes=1 + len(shares), node_rank=0, total_slots=total, chief_addr=address, port=port
    )


def claim_share(trial_id: int, run_id: int, node_rank: int, worker: str) -> RunShare | None:
    """Claim a share for ``worker`` (conditional UPDATE: one delivery gets in); None when it was
    claimed already or its run ended."""
    if not lifecycle.share_claim(
        trial_id=trial_id, run_id=run_id, node_rank=node_rank, worker=worker
    ):
        return None
    return RunShare.objects.select_related("run__trial__experiment", "run__host", "host").get(
        run__trial_id=trial_id, run__run_id=run_id, node_rank=node_rank
    )


def wait_for_rendezvous(share: RunShare, interval: float = 0.25) -> NodePlan | None:
    """Block until the chief published its rendezvous address (heartbeating the share); None
    when the run ended or ``HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS`` passed first."""
    deadline = time.monotonic() + settings.HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        row = RunShare.objects.filter(id=share.id).values_list("rendezvous", "run__state").first()
        if row is None or row[1] == RunState.EXITED:
            return None
        if row[0]:
            address, _, port = row[0].rpartition(":")
            others = RunShare.objects.filter(run_id=share.run_id)
            total = (share.run.slots or 1) + sum(others.values_list("slots", flat=True))
            return NodePlan(
                nnodes=1 + others.count(),
                node_rank=share.node_rank,
                total_slots=total,
                chief_addr=address,
                port=int(port),
            )
        share_heartbeat(share)
        time.sleep(interval)
    return None


def share_running(share: RunShare) -> None:
    """Mark a claimed share as RUNNING (its processes started)."""
    lifecycle.share_running(share.id)


def share_heartbeat(share: RunShare) -> None:
    """Record that the share's worker is alive."""
    lifecycle.share_heartbeat(share.id)


def share_exited(share: RunShare, exit_code: int | None) -> None:
    """Record the share's exit (``None``: stopped by its worker's shutdown or never started)."""
    lifecycle.share_exited(share.id, exit_code)


def run_gone(run_pk: int) -> str:
    """For a share's worker: ``"kill"`` when the run is being killed, ``"ended"`` when it
    exited, else ``""``."""
    row = TrialRun.objects.filter(id=run_pk).values_list("state", "stop_requested").first()
    if row is None or row[0] == RunState.EXITED:
        return "ended"
    return "kill" if row[1] == StopReason.KILL else ""


def shares_problem(run: TrialRun, started: float) -> tuple[str, str] | None:
    """For the chief's worker: ``(FAILED|LOST, message)`` when another host's share failed, went
    silent or never started; None while they are fine (or the run has no shares)."""
    now = timezone.now()
    lapsed = now - lease_expiry()  # a lease older than this: that host's ranks are gone
    unrenewed = now - timedelta(seconds=settings.HEADWAY_LEASE_SECONDS)
    waited = time.monotonic() - started
    for node, host, state, code, beat, host_beat in RunShare.objects.filter(run=run).values_list(
        "node_rank", "host__name", "state", "exit_code", "heartbeat_at", "host__heartbeat_at"
    ):
        where = f"node {node} (host {host})"
        if state == RunState.EXITED and code != 0:
            if code is None:
                return LOST, f"host {host} lost: {where} stopped without an exit code"
            return FAILED, f"{where} exited with code {code}"
        if state == RunState.QUEUED and (host_beat is None or host_beat < unrenewed):
            # Its host stopped, or has renewed nothing for a lease: the share cannot start.
            return LOST, f"host {host} lost: {where} cannot start"
        if state == RunState.QUEUED and waited > settings.HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS:
            return LOST, f"host {host} lost: {where} did not start within the rendezvous timeout"
        if state in (RunState.STARTING, RunState.RUNNING) and beat is not None and beat < lapsed:
            return LOST, f"host {host} lost: {where} stopped heartbeating (its lease lapsed)"
    return None


def wait_shares_ended(run: TrialRun, timeout: float) -> list[int | None]:
    """Wait up to ``timeout`` s for the run's shares to exit or their leases to lapse; return
    their exit codes (a share whose lease lapsed, or still running at the deadline, counts as
    ``None``: lost)."""
    deadline = time.monotonic() + timeout
    while True:
        lapsed = timezone.now() - lease_expiry()
        rows = list(
            RunShare.objects.filter(run=run).values_list("state", "exit_code", "heartbeat_at")
        )
        codes: list[int | None] = []
        waiting = False
        for state, code, beat in rows:
            if state == RunState.EXITED:
                codes.append(code)
            elif state == RunState.QUEUED:
                codes.append(0)  # never started: nothing of it runs
            elif beat is not None and beat < lapsed:
                codes.append(None)
            else:
                codes.append(None)
                waiting = True
        if not waiting or time.monotonic() >= deadline:
            return codes
        time.sleep(0.25)


class ShareWatch:
    """The chief's check of the other hosts of its run (nothing to do for a one-host run).

    ``check()`` is called from the runner's loop; ``final_exit_code()`` once the chief's
    process ended.
    """

    def __init__(self, run: TrialRun) -> None:
        self.run = run
        self.has_shares = RunShare.objects.filter(run=run).exists()
        self.started = time.monotonic()
        self.problem: tuple[str, str] | None = None

    def check(self) -> str | None:
        """A line for the logs when another host's failure means this host's ranks must stop."""
        if not self.has_shares or self.problem is not None:
            return None
        self.problem = shares_problem(self.run, self.started)
        if self.problem is None:
            return None
        return f"[headway] {self.problem[1]}: stopping the ranks of this host"

    def final_exit_code(self, exit_code: int | None, note: Callable[[str], None]) -> int | None:
        """The run's exit code from the chief's and the shares' ones: a failure anywhere is the
        run's failure; a lost host makes the run lost (re-queued, not a restart)."""
        if not self.has_shares:
            return exit_code
        # The other hosts stop their ranks within twice the kill grace of the run's end (after
        # the grace, then SIGKILL); a host that is gone is decided by its lease.
        grace = settings.HEADWAY_KILL_GRACE_SECONDS
        codes = wait_shares_ended(self.run, max(2 * grace + 5, lease_expiry().total_seconds()))
        if self.problem is not None and self.problem[0] == LOST:
            return None
        if exit_code != 0 and None in codes:
            # These ranks failed while another host vanished (its peers' connections broke):
            # the host's loss, not the trial's failure.
            gone = (
                RunShare.objects.filter(run=self.run)
                .exclude(state=RunState.EXITED, exit_code__isnull=False)
                .exclude(state=RunState.QUEUED)
            )
            names = ", ".join(
                sorted(name or "?" for name in gone.values_list("host__name", flat=True))
            )
            self.problem = (LOST, f"host {names} lost: its ranks stopped without an exit code")
            note(f"[headway] {self.problem[1]}; this host's ranks failed with it")
            return None
        if exit_code == 0:
            failed = [code for code in codes if code != 0]
            if failed:
                note(f"[headway] another host's ranks exited with code {failed[0]}")
                return failed[0]
        return exit_code
