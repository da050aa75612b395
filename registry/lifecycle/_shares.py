"""A run's shares on other hosts (``RunShare``): their state writes, in one place.

A share of a run ganged over several hosts goes QUEUED -> STARTING (claimed by one worker) ->
RUNNING (its ranks started) -> EXITED, heartbeating meanwhile; the chief's host publishes the
rendezvous endpoint to every share. Both host paths call these: the worker
(``workers.distributed``) and the host agent's REST routes (``registry.lifecycle.host_agent``,
which first checks that the share is placed on the calling host). Every write is a conditional
UPDATE, so a redelivered task or a repeated report changes nothing.
"""

from __future__ import annotations

from django.utils import timezone

from registry.models import RunShare, RunState


def share_claim(*, trial_id: int, run_id: int, node_rank: int, worker: str) -> bool:
    """Claim share ``node_rank`` of run ``run_id`` of trial ``trial_id`` for ``worker``: one
    delivery gets True; False when it was claimed already or its run ended."""
    now = timezone.now()
    claimed = (
        RunShare.objects.filter(
            run__trial_id=trial_id, run__run_id=run_id, node_rank=node_rank, state=RunState.QUEUED
        )
        .exclude(run__state=RunState.EXITED)
        .update(state=RunState.STARTING, worker=worker, started_at=now, heartbeat_at=now)
    )
    return claimed == 1


def share_running(share_id: int) -> None:
    """A claimed share's processes started: STARTING becomes RUNNING."""
    RunShare.objects.filter(id=share_id, state=RunState.STARTING).update(
        state=RunState.RUNNING, heartbeat_at=timezone.now()
    )


def share_heartbeat(share_id: int) -> None:
    """The share's worker is alive (its lease is renewed); an EXITED share is left alone."""
    RunShare.objects.filter(id=share_id).exclude(state=RunState.EXITED).update(
        heartbeat_at=timezone.now()
    )


def share_exited(share_id: int, exit_code: int | None) -> None:
    """Record the share's exit (``None``: stopped by its host's shutdown or lease, or never
    started); a repeated report changes nothing."""
    RunShare.objects.filter(id=share_id).exclude(state=RunState.EXITED).update(
        state=RunState.EXITED, exit_code=exit_code, ended_at=timezone.now()
    )


def shares_publish_rendezvous(run_pk: int, endpoint: str) -> None:
    """The chief's host publishes where the run's hosts meet (``"address:port"``) to every
    share of the run (``TrialRun`` primary key ``run_pk``)."""
    RunShare.objects.filter(run_id=run_pk).update(rendezvous=endpoint)
