"""The web tier stands in for a silent master worker's lost-run reaper.

The master's Celery worker runs the periodic reaper pass (``reaper_pass``: lost runs, shares and
unmanaged runs, a placement pass, tasks no host claimed). While that worker is down (crashed,
redeployed, its broker away), nobody would notice a host that died: its trial would sit RUNNING
with no process. Every web server already serves the hosts' heartbeats, so the one serving a
heartbeat checks the worker's last beat (``registry.health.last_beat``, at most once a second per
process); once ``registry.health.master_worker_limit()`` passed without one (the age at which
``GET /api/v1/health/`` reports the worker down), it runs the reaper pass itself. A worker that
never beat (a cluster being set up) is not stood in for. A conditional
UPDATE of the ``web_standin`` beat row lets one web process per reaper interval in the whole
cluster take that turn. The worker's own beat is not written: health still says it is down.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from registry.health import last_beat, master_worker_limit, reaper_interval
from registry.lifecycle._runs import reap_lost_runs
from registry.lifecycle._unmanaged import reap_lost_unmanaged_runs
from registry.models import ComponentBeat
from registry.scheduling import place_queued_runs, redispatch_unclaimed_runs

logger = logging.getLogger("headway.lifecycle")

STANDIN = "web_standin"  # the ComponentBeat row of the web tier's last stand-in pass
CHECK_EVERY_S = 1.0  # a web process reads the worker's beat at most this often
_next_check = 0.0  # time.monotonic() of this process's next look at the worker's beat


def reaper_pass() -> None:
    """One pass of the master's periodic duties (``registry.tasks.reap_lost_runs`` every
    ``HEADWAY_REAPER_INTERVAL_SECONDS``): runs and shares whose lease lapsed, unmanaged runs
    that went silent, a placement pass (the safety net for passes that failed, and what waits
    on time alone), and the tasks of placed runs no host claimed."""
    reap_lost_runs()
    reap_lost_unmanaged_runs()
    place_queued_runs()
    redispatch_unclaimed_runs(timeout=timedelta(seconds=settings.HEADWAY_DISPATCH_TIMEOUT_SECONDS))


def stand_in_if_silent(now: datetime | None = None) -> bool:
    """Run ``reaper_pass`` here when the master worker, which beat before, has not beaten for
    ``master_worker_limit()`` seconds and no web process took that turn within the last reaper
    interval; True when this call ran it. Cheap otherwise: nothing at all within a second of
    this process's last look, else one read of the worker's beat."""
    global _next_check
    if time.monotonic() < _next_check:
        return False
    _next_check = time.monotonic() + CHECK_EVERY_S
    now = now or timezone.now()
    beat = last_beat()
    # A worker that never beat is a cluster being set up (or a test database), not one whose
    # worker went away: nothing is stood in for then.
    if beat is None or (now - beat).total_seconds() < master_worker_limit():
        return False
    if not _take_turn(now):
        return False
    logger.warning(
        "the master worker is silent (last beat %.0f s ago): a web process runs its reaper pass",
        (now - beat).total_seconds(),
    )
    reaper_pass()
    return True


def _take_turn(now: datetime) -> bool:
    """Claim the stand-in's turn for this reaper interval (one conditional UPDATE; the first
    turn ever inserts the row)."""
    due = now - timedelta(seconds=reaper_interval())
    if ComponentBeat.objects.filter(name=STANDIN, beat_at__lte=due).update(beat_at=now):
        return True
    _, created = ComponentBeat.objects.get_or_create(name=STANDIN, defaults={"beat_at": now})
    return created
