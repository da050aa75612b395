"""Re-sending the tasks of placed runs no worker claimed (a lost broker message).

A placed run's task goes to its host's queue once the placement commits. If that message is
lost (the broker restarted without persistence, the send failed while the broker was down, a
worker took it and died before acknowledging without ``acks_late``), the run would stay QUEUED
forever: the lost-run reaper only looks at started runs, and ``host_redispatch`` only runs when
a worker (re)starts. So the periodic reaper also calls ``redispatch_unclaimed_runs``: a run
placed more than ``HEADWAY_DISPATCH_TIMEOUT_SECONDS`` ago and still QUEUED gets its task (and
its hosts' share tasks) sent again. A duplicate delivery stays harmless: the worker's claim is a
conditional UPDATE that lets one delivery in.

The time of the last dispatch is the run's ``heartbeat_at`` while it is QUEUED (set by the
placement and by each re-send; the worker's claim overwrites it with its first heartbeat). Runs
not placed yet need no message: every reaper pass also runs a placement pass.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from registry.models import RunShare, RunState, State, TrialRun
from registry.scheduling._dispatch import send_run_task, send_share_task

logger = logging.getLogger("headway.scheduler")


def redispatch_unclaimed_runs(*, timeout: timedelta) -> list[tuple[int, int]]:
    """Send again the task of every placed run still QUEUED ``timeout`` after its last dispatch;
    return the ``(trial_id, run_id)`` of those the broker took (every task of the run).

    Safe to run from several places at once: each re-send first moves the run's dispatch time
    with a conditional UPDATE, so one caller per run and pass sends it.
    """
    now = timezone.now()
    cutoff = now - timeout
    # A run on hosts its pool made for it has no Celery task: its pool runs it.
    stale = TrialRun.objects.filter(
        state=RunState.QUEUED,
        host__isnull=False,
        host__made_for_run__isnull=True,
        trial__state=State.ACTIVE,
    ).filter(
        # A run placed before dispatch times were recorded counts from its creation.
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff)
    )
    resent: list[tuple[int, int]] = []
    for pk, trial_id, run_id, queue, last in stale.values_list(
        "id", "trial_id", "run_id", "host__queue", "heartbeat_at"
    ):
        moved = TrialRun.objects.filter(id=pk, state=RunState.QUEUED, heartbeat_at=last).update(
            heartbeat_at=now
        )
        if not moved:
            continue  # claimed, dropped or re-sent by another pass meanwhile
        logger.warning(
            "trial %s run %s was placed but no worker claimed it in %.0f s; task sent again",
            trial_id,
            run_id,
            timeout.total_seconds(),
        )
        shares = RunShare.objects.filter(run_id=pk, state=RunState.QUEUED).values_list(
            "node_rank", "host__queue"
        )
        sent = send_run_task(trial_id, run_id, queue) and all(
            send_share_task(trial_id, run_id, node_rank, share_queue)
            for node_rank, share_queue in shares
        )
        if not sent:
            # The broker is away (logged): the next pass tries this run again ``timeout`` on
            # (its dispatch time moved) and the others at once; no pass waits on every send.
            break
        resent.append((trial_id, run_id))
    return resent
