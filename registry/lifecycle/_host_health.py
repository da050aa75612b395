"""Hosts that keep failing runs before they start are drained automatically.

A run lost before its ranks started (``registry.lifecycle._lost``) is retried with back-off, and
its trial fails after ``max_lost_before_start`` such losses. When the cause is the host (a
broken driver, a full disk, a launcher that cannot start) every trial placed there pays for it,
one after another. So the master counts, per agent host, runs lost on it in a row before their
ranks started (``WorkerHost.failed_starts``); the ``HEADWAY_HOST_MAX_FAILED_STARTS``-th (default
3; 0 never) drains the host (``DRAINING``: no new runs, running ones finish) with the reason in
``WorkerHost.admin_reason``, shown by ``headway host list``, ``GET /api/v1/hosts/`` and the
Workers page, and in the master's log. A run that starts on the host resets the count; an
admin's ``enable`` puts it back in service. A host its pool made for one run (a per-run pool's,
``WorkerHost.made_for_run``) counts with its pool type's rule instead, asked here
(``PoolProvider.host_failed_start``, ``host_started``), which may exclude the cluster's nodes
under it from the pool's later runs rather than drain them. The idea is Kubernetes' node
problem detector tainting a node, and a batch scheduler draining a node whose prolog fails.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db.models import F

from registry.models import HostAdminState, WorkerHost
from registry.pools import per_run_providers

logger = logging.getLogger("headway.scheduler")


def host_failed_start(host_id: int | None, why: str, *, trial_id: int, run_id: int) -> bool:
    """Count a run (``run_id`` of trial ``trial_id``) lost on host ``host_id`` before its ranks
    started (``why``: the cause, for the reason); drain the host at
    ``HEADWAY_HOST_MAX_FAILED_STARTS`` in a row. Returns True when this call drained it (or
    excluded a node). A host its pool made for one run counts with its pool type's rule
    instead (``PoolProvider.host_failed_start``); no host counts nothing."""
    if host_id is None:
        return False
    if WorkerHost.objects.filter(id=host_id, made_for_run__isnull=False).exists():
        for provider in per_run_providers():
            counted = provider.host_failed_start(host_id, why, trial_id=trial_id, run_id=run_id)
            if counted is not None:
                return counted
        return False
    rows = WorkerHost.objects.filter(id=host_id, made_for_run__isnull=True)
    rows.update(failed_starts=F("failed_starts") + 1)
    limit = settings.HEADWAY_HOST_MAX_FAILED_STARTS
    if limit <= 0:
        return False
    found = rows.filter(failed_starts__gte=limit).values_list("name", "failed_starts").first()
    if found is None:
        return False
    name, count = found
    reason = (
        f"drained automatically: {count} runs in a row were lost on it before their ranks "
        f"started (HEADWAY_HOST_MAX_FAILED_STARTS {limit}); last: {why}"
    )[:500]
    # Only a host that is still ENABLED: an admin's own disable or drain is left as it is.
    if not rows.filter(admin_state=HostAdminState.ENABLED).update(
        admin_state=HostAdminState.DRAINING, admin_reason=reason
    ):
        return False
    logger.error("host %s: %s", name, reason)
    return True


def host_started_a_run(host_id: int | None) -> None:
    """A run's ranks started on host ``host_id``: its count of failed starts begins again;
    on a host its pool made for the run, its pool type's counts too
    (``PoolProvider.host_started``)."""
    if host_id is None:
        return
    WorkerHost.objects.filter(id=host_id, failed_starts__gt=0).update(failed_starts=0)
    if WorkerHost.objects.filter(id=host_id, made_for_run__isnull=False).exists():
        for provider in per_run_providers():
            provider.host_started(host_id)
