"""Runs over several hosts: the chief's view of the other hosts' shares, and each share's plan.

A run ganged over several hosts (``registry.scheduling``) has its chief part on the run itself
(node 0, run by ``workers.runner.run_trial``) and one share per other host (nodes 1.., run by
``workers.runner.run_trial_share``). The hosts meet through torchrun's static rendezvous on the
chief host; the master carries what torchrun does not (all over REST, ``workers.link``):

- the rendezvous address: the chief's host publishes ``address:port`` once it claimed the run
  (``run_rendezvous``); each share's host waits for it before starting its ranks;
- failure: a share that exits non-zero, whose lease lapsed (its host stopped renewing it: its
  ranks are gone), whose host is lost before it started (the master judges these on its own
  clock: ``wire.ShareStatus.problem``), or that never starts within
  ``HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS`` makes the chief's host stop its own ranks (its torchrun
  may otherwise wait in a collective); a run that ended (or is killed) makes every share's host
  stop its ranks. No rank outlives its run on any host. A lost host makes the run lost
  (re-queued, not counted as a restart), also when the chief's ranks failed first because their
  peers vanished.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable

from headway.client import wire
from workers import link
from workers.address import host_address
from workers.config import settings

# Why the chief stops its ranks because of another host; "lost" re-queues without a restart.
FAILED = "failed"
LOST = "lost"
_EXITED = "EXITED"
_QUEUED = "QUEUED"


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


def total_slots(spec: wire.LaunchSpec) -> int:
    """The run's world size: its chief part's slots plus every share's."""
    return max(spec.run_slots, 1) + sum(share.slots for share in spec.shares)


def chief_plan(spec: wire.LaunchSpec, prepare: Callable[[str], None] | None = None) -> NodePlan:
    """The chief's ``NodePlan``; for a run over several hosts, publish the rendezvous address
    (this host's advertised address, ``workers.address``, and a free port) to its shares,
    after ``prepare(rendezvous)`` (the shared-storage marker, ``workers.runner``)."""
    total = total_slots(spec)
    if not spec.shares:
        return NodePlan(total_slots=total)
    address, port = host_address(), free_port()
    if prepare is not None:
        prepare(f"{address}:{port}")
    link.api().run_rendezvous(spec.trial_id, spec.run_id, address=address, port=port)
    return NodePlan(
        nnodes=1 + len(spec.shares), node_rank=0, total_slots=total, chief_addr=address, port=port
    )


def wait_for_rendezvous(spec: wire.LaunchSpec, interval: float = 0.25) -> NodePlan | None:
    """Block until the chief published its rendezvous address (asking heartbeats the share);
    None when the run ended or ``HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS`` passed first."""
    deadline = time.monotonic() + settings.HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            plan = link.api().share_rendezvous(spec.trial_id, spec.run_id, spec.node_rank)
        except Exception as exc:
            if not link.is_master_unavailable(exc):
                raise
            time.sleep(interval)
            continue
        if plan.run_state == _EXITED:
            return None
        if plan.ready and plan.address and plan.port:
            return NodePlan(
                nnodes=plan.nnodes,
                node_rank=plan.node_rank,
                total_slots=plan.total_slots,
                chief_addr=plan.address,
                port=plan.port,
            )
        time.sleep(interval)
    return None


def run_gone(spec: wire.LaunchSpec) -> str:
    """For a share's host, heartbeating the share: ``"kill"`` when the run is being killed,
    ``"stale"`` when the master ended this share (lost) while this host could not reach it
    (fencing: stopped at once), ``"ended"`` when the run exited, else ``""``."""
    status = link.api().share_heartbeat(spec.trial_id, spec.run_id, spec.node_rank)
    if status.share_state == _EXITED:
        return "stale"
    if status.state == _EXITED:
        return "ended"
    return "kill" if status.stop_requested == "kill" else ""


def shares_problem(spec: wire.LaunchSpec, started: float) -> tuple[str, str] | None:
    """For the chief's host: ``(FAILED|LOST, message)`` when another host's share failed, went
    silent or never started; None while they are fine (or the run has no shares)."""
    waited = time.monotonic() - started
    for share in link.api().run_shares(spec.trial_id, spec.run_id):
        if share.problem:
            kind, _, message = share.problem.partition(": ")
            return (FAILED if kind == FAILED else LOST), message
        if share.state == _QUEUED and waited > settings.HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS:
            where = f"node {share.node_rank} (host {share.host})"
            return (
                LOST,
                f"host {share.host} lost: {where} did not start within the rendezvous timeout",
            )
    return None


def _ended_code(share: wire.ShareStatus) -> tuple[int | None, bool]:
    """A share's exit code for the run's, and whether it may still be running."""
    if share.state == _EXITED:
        return share.exit_code, False
    if share.state == _QUEUED:
        return 0, False  # never started: nothing of it runs
    if share.problem.startswith(LOST):
        return None, False  # its lease lapsed: its ranks are gone
    return None, True


def wait_shares_ended(spec: wire.LaunchSpec, timeout: float) -> list[wire.ShareStatus]:
    """Wait up to ``timeout`` s for the run's shares to exit or their leases to lapse; return
    their last status (``share_exit_codes`` reads it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            shares = link.api().run_shares(spec.trial_id, spec.run_id)
        except Exception as exc:
            if not link.is_master_unavailable(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(1.0)
            continue
        if not any(_ended_code(share)[1] for share in shares) or time.monotonic() >= deadline:
            return shares
        time.sleep(0.25)


class ShareWatch:
    """The chief's check of the other hosts of its run (nothing to do for a one-host run).

    ``check()`` is called from the runner's loop; ``final_exit_code()`` once the chief's
    process ended.
    """

    def __init__(self, spec: wire.LaunchSpec) -> None:
        self.spec = spec
        self.has_shares = bool(spec.shares)
        self.started = time.monotonic()
        self.problem: tuple[str, str] | None = None

    def check(self) -> str | None:
        """A line for the logs when another host's failure means this host's ranks must stop."""
        if not self.has_shares or self.problem is not None:
            return None
        self.problem = shares_problem(self.spec, self.started)
        if self.problem is None:
            return None
        return f"[headway] {self.problem[1]}: stopping the ranks of this host"

    def final_exit_code(self, exit_code: int | None, note: Callable[[str], None]) -> int | None:
        """The run's exit code from the chief's and the shares' ones: a failure anywhere is the
        run's failure; a lost host makes the run lost (re-queued, not a restart)."""
        if not self.has_shares:
            return exit_code
        # The other hosts stop their ranks within twice the kill grace of the run's end (after
        # the grace, then SIGKILL); a host that is gone is decided by its lease on the master.
        grace = settings.HEADWAY_KILL_GRACE_SECONDS
        shares = wait_shares_ended(
            self.spec, max(2 * grace + 5, 2 * settings.HEADWAY_LEASE_SECONDS)
        )
        codes = [_ended_code(share)[0] for share in shares]
        if self.problem is not None and self.problem[0] == LOST:
            return None
        if exit_code != 0 and None in codes:
            # These ranks failed while another host vanished (its peers' connections broke):
            # the host's loss, not the trial's failure.
            gone = [
                share.host or "?"
                for share in shares
                if share.state not in (_QUEUED,)
                and not (share.state == _EXITED and share.exit_code is not None)
            ]
            names = ", ".join(sorted(gone))
            self.problem = (LOST, f"host {names} lost: its ranks stopped without an exit code")
            note(f"[headway] {self.problem[1]}; this host's ranks failed with it")
            return None
        if exit_code == 0:
            failed = [code for code in codes if code != 0]
            if failed:
                note(f"[headway] another host's ranks exited with code {failed[0]}")
                return failed[0]
        return exit_code
