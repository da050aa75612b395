"""The runs a per-run pool type submits (``HostOrigin.PER_RUN``): its queued, unplaced runs."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q
from django.utils import timezone

from registry.models import RunState, State, TrialRun


def queued_runs(namespace: str, pool_names: Iterable[str]) -> list[tuple[int, str]]:
    """``(run pk, pool name)`` of every queued run of ``pool_names`` in ``namespace`` that no
    host holds, of an active trial and past any back-off after a loss before start
    (``registry.lifecycle._lost``), in queue order (priority, then submission)."""
    return list(
        TrialRun.objects.filter(
            namespace=namespace,
            state=RunState.QUEUED,
            host__isnull=True,
            trial__state=State.ACTIVE,
            pool__in=list(pool_names),
        )
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=timezone.now()))
        .order_by("priority", "created_at", "id")
        .values_list("id", "pool")
    )
