"""Which runs and shares a host may touch: the checks every host-agent route makes first
(``registry.lifecycle.host_agent``), and the rows they answer with.

A run or share that does not exist is ``NotFound`` (404); one placed on another host is
``NotPermitted`` (403).
"""

from __future__ import annotations

from registry.authz import NotPermitted
from registry.errors import RegistryError
from registry.models import RunShare, TrialRun


class NotFound(RegistryError):
    """404: no such run or share."""

    status = 404


def placed_run(host: str, trial_id: int, run_id: int) -> TrialRun:
    """Run ``run_id`` of trial ``trial_id``, checked to be placed on ``host``.

    Raises:
        NotFound: (404) no such run.
        NotPermitted: (403) the run is not placed on ``host``.
    """
    run = (
        TrialRun.objects.select_related("host", "trial__experiment")
        .filter(trial_id=trial_id, run_id=run_id)
        .first()
    )
    if run is None:
        raise NotFound(f"Trial {trial_id} has no run {run_id}.")
    if run.host is None or run.host.name != host:
        raise NotPermitted(f"Run {run_id} of trial {trial_id} is not placed on host {host}.")
    return run


def fresh_run(trial_id: int, run_id: int) -> TrialRun:
    """The run as it is now, after a write (``NotFound`` when it was deleted meanwhile)."""
    run = TrialRun.objects.filter(trial_id=trial_id, run_id=run_id).first()
    if run is None:  # deleted meanwhile (its experiment was)
        raise NotFound(f"Trial {trial_id} has no run {run_id}.")
    return run


def placed_share(host: str, trial_id: int, run_id: int, node_rank: int) -> RunShare:
    """Share ``node_rank`` of the run, checked to be placed on ``host``.

    Raises:
        NotFound: (404) no such share.
        NotPermitted: (403) the share is not placed on ``host``.
    """
    share = (
        RunShare.objects.select_related("host", "run__trial__experiment", "run__host")
        .filter(run__trial_id=trial_id, run__run_id=run_id, node_rank=node_rank)
        .first()
    )
    if share is None:
        raise NotFound(f"Run {run_id} of trial {trial_id} has no node {node_rank}.")
    if share.host is None or share.host.name != host:
        raise NotPermitted(
            f"Node {node_rank} of run {run_id} of trial {trial_id} is not placed on host {host}."
        )
    return share


def fresh_share(share: RunShare) -> RunShare:
    """The share as it is now, with its run (``NotFound`` when it was deleted meanwhile)."""
    fresh = RunShare.objects.select_related("run").filter(id=share.id).first()
    if fresh is None:  # deleted meanwhile (its experiment was)
        raise NotFound(
            f"Run {share.run.run_id} of trial {share.run.trial_id} has no node {share.node_rank}."
        )
    return fresh
