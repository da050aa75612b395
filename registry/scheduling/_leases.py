"""The master's side of leases through its own outages: time it could not serve is not counted.

A lease (a run's or share's ``heartbeat_at``) is renewed by its host's heartbeats, which only a
serving master can answer. When the web tier (or its database) is down for everyone, every
lease of the cluster ages although no host is at fault; judging them by the clock alone would
re-queue every running trial after a 38 s web restart. So the master tells its own outage from a
host's loss by the other hosts of the same namespace:

- the master *serves* a namespace while some host of it heartbeated within
  ``HEADWAY_HOST_TIMEOUT_SECONDS`` (``serving``); a partitioned host is lost after its lease plus
  ``HEADWAY_LEASE_MARGIN_SECONDS`` while the others keep beating, as before;
- while no host of the namespace is served, nothing is judged lost before
  ``HEADWAY_OUTAGE_TOLERANCE_SECONDS`` plus the margin: that is when the hosts stop their runs
  themselves (``workers.leases``), so only then may a run be placed again;
- the first heartbeat served after such a silence renews every live lease of the namespace
  (``resume_after_outage``): each gets a fresh lease plus margin from the moment the master
  resumed serving, which gives the hosts time to reach it again.

A run whose host cannot reach the master while others can is re-placed after lease plus margin
although that host may go on computing until the tolerance; the fencing of
``registry.lifecycle.host_agent`` (the stale run's token refused, the host told to stop it and not
placeable until it did) keeps that copy from writing anything or sharing its slots.
Kubernetes' node lifecycle controller has the same rule ("disruption mode": when every node of
a zone is unready, the controller assumes its own connectivity failed and evicts nothing).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from registry.models import RunShare, RunState, TrialRun, WorkerHost
from registry.models.host import alive_cutoff
from registry.scheduling._hosts import lease_expiry

_LIVE = (RunState.STARTING, RunState.RUNNING)


def outage_expiry() -> timedelta:
    """How long after its last renewal a lease is lost while the master serves no host of its
    namespace: ``HEADWAY_OUTAGE_TOLERANCE_SECONDS`` plus the margin (by then the host stopped
    the run itself, whatever kept it from the master)."""
    return timedelta(
        seconds=settings.HEADWAY_OUTAGE_TOLERANCE_SECONDS + settings.HEADWAY_LEASE_MARGIN_SECONDS
    )


def serving(namespace: str, now: datetime | None = None) -> bool:
    """Whether the master served a heartbeat of some host of ``namespace`` within
    ``HEADWAY_HOST_TIMEOUT_SECONDS`` of ``now``."""
    return WorkerHost.objects.filter(
        namespace=namespace, heartbeat_at__gte=alive_cutoff(now)
    ).exists()


def lease_cutoff(namespace: str, now: datetime | None = None) -> tuple[datetime, timedelta]:
    """The oldest renewal a live lease of ``namespace`` may have at ``now``, and the expiry it
    was judged by (``lease_expiry`` while the master serves the namespace, else
    ``outage_expiry``)."""
    now = now or timezone.now()
    expiry = lease_expiry() if serving(namespace, now) else outage_expiry()
    return now - expiry, expiry


def resume_after_outage(
    namespace: str, now: datetime | None = None, served_at: datetime | None = None
) -> int:
    """Called with each host heartbeat of ``namespace`` before the host row is written: when the
    master served no host of it for ``HEADWAY_HOST_TIMEOUT_SECONDS`` (its own outage, or every
    host was cut off), renew every live lease of the namespace at ``now`` (a fresh grace from
    the moment it serves again). Returns how many runs and shares were renewed (0 while it was
    serving: one cheap query, none when ``served_at``, the beating host's own last recorded
    heartbeat in ``namespace``, already shows it was)."""
    now = now or timezone.now()
    if served_at is not None and served_at >= alive_cutoff(now):
        return 0
    if serving(namespace, now):
        return 0
    runs = TrialRun.objects.filter(namespace=namespace, state__in=_LIVE, heartbeat_at__lt=now)
    shares = RunShare.objects.filter(
        run__namespace=namespace, state__in=_LIVE, heartbeat_at__lt=now
    )
    return runs.update(heartbeat_at=now) + shares.update(heartbeat_at=now)


def lapsed(
    namespace_field: str, now: datetime, timeout: timedelta | None = None
) -> list[tuple[Q, timedelta]]:
    """Filters of the live rows whose lease lapsed at ``now`` (runs: ``namespace_field``
    ``"namespace"``, shares: ``"run__namespace"``), one per namespace with live rows, each with
    the expiry its namespace's ``lease_cutoff`` judged by; ``timeout`` (tests and tools) judges
    every row by that expiry instead."""
    if timeout is not None:
        return [(Q(heartbeat_at__lt=now - timeout), timeout)]
    model = TrialRun if namespace_field == "namespace" else RunShare
    namespaces = (
        model.objects.filter(state__in=_LIVE).values_list(namespace_field, flat=True).distinct()
    )
    found = []
    for namespace in namespaces:
        cutoff, expiry = lease_cutoff(namespace, now)
        found.append((Q(**{namespace_field: namespace}, heartbeat_at__lt=cutoff), expiry))
    return found
