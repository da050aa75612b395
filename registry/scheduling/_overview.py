"""Reads for the REST API, the CLI and the dashboard: hosts with what runs where, and messages."""

from __future__ import annotations

from django.db.models import (
    Exists,
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce

from registry.models import RunShare, RunState, Trial, TrialRun, WorkerHost
from registry.models.host import shares_holding_slots


def host_list() -> QuerySet[WorkerHost]:
    """Hosts by name, each with ``slots_in_use`` (int, annotated) and ``active_runs``.

    ``active_runs`` (prefetched, oldest first, trial joined) are the runs holding the host's
    slots: every run placed on it that is not EXITED (QUEUED ones included: their task is on
    the way). ``slots_in_use`` is the sum of their ``slots`` plus the slots of the run shares
    (parts of runs ganged over several hosts) it holds, as placement counts them.
    """
    active = (
        TrialRun.objects.exclude(state=RunState.EXITED)
        .select_related("trial")
        .order_by("created_at", "id")
    )
    # Parts of runs ganged over several hosts hold this host's slots too (as placement counts).
    shares = (
        RunShare.objects.filter(host=OuterRef("pk"))
        .filter(shares_holding_slots())
        .values("host")
        .annotate(total=Sum("slots"))
        .values("total")
    )
    runs = (
        TrialRun.objects.filter(host=OuterRef("pk"))
        .exclude(state=RunState.EXITED)
        .values("host")
        .annotate(total=Sum("slots"))
        .values("total")
    )
    return (
        WorkerHost.objects.annotate(
            slots_in_use=Coalesce(Subquery(runs), Value(0)) + Coalesce(Subquery(shares), Value(0))
        )
        .prefetch_related(Prefetch("runs", queryset=active, to_attr="active_runs"))
        .order_by("name")
    )


def experiment_scheduling_message() -> Coalesce:
    """For ``Experiment.objects.annotate(scheduling_message=...)``: the first scheduling message
    of its trials (by trial id) that still have a waiting run, else ``""``."""
    waiting = TrialRun.objects.filter(
        trial=OuterRef("pk"), state=RunState.QUEUED, host__isnull=True
    )
    trials = (
        Trial.objects.filter(experiment=OuterRef("pk"))
        .exclude(scheduling_message="")
        .filter(Exists(waiting))
        .order_by("id")
        .values("scheduling_message")[:1]
    )
    return Coalesce(Subquery(trials), Value(""))
