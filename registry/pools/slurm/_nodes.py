"""Slurm nodes that keep failing runs before they start: Headway stops sending its jobs there.

The agent hosts' rule (``registry.lifecycle._host_health``) for the nodes of a slurm pool. A
run lost before its ranks started (mostly a job that ended while its run was still QUEUED or
STARTING: ``_reconcile``), counted by the lifecycle as on agents (its trial ACTIVE, the run its
current one), counts a failed start on each node of its job (``SlurmNode.failed_starts``, in
a row); the ``HEADWAY_HOST_MAX_FAILED_STARTS``-th (default 3; 0 never) excludes the node: the
pool's later jobs carry ``sbatch --exclude`` (``_submit``, ``_script``), the reason is shown
with the pool (``GET /api/v1/resource-pools/``, ``headway pool list``, the Workers page), in
the master's log and in the trial's log. A run whose ranks start on a job resets its nodes'
counts; an admin's ``enable`` (``POST /api/v1/resource-pools/{pool}/nodes/{node}/enable/``,
``headway pool enable-node``) puts a node back. Headway is a Slurm user, not its admin, so it
never drains a node in Slurm itself (docs/decisions/scheduling.md, "Slurm nodes that fail
starts").

Every node of a multi-node job counts, since which one failed is not known here: a healthy
node's count is reset by the next run that starts on it.
"""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from registry.errors import InvalidInput, RegistryError
from registry.models import TrialLog
from registry.pools.slurm._commands import SlurmError, hostnames
from registry.pools.slurm.models import SlurmNode

logger = logging.getLogger("headway.slurm")

# A Slurm NodeName as sites write them (the database column holds 200 characters).
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")


class SlurmNodeNotFound(RegistryError):
    """404: the pool has no node of this name that Headway counted or excluded."""

    status = 404


def _names(expression: str) -> list[str]:
    try:
        return hostnames(expression)
    except SlurmError as exc:
        logger.warning("Slurm node list %r could not be expanded: %s", expression, exc)
        return []


def nodes_failed_start(
    *, namespace: str, pool: str, nodes: str, why: str, trial_id: int, run_id: int
) -> list[str]:
    """Count a run lost before start on each node of ``nodes`` (squeue's hostlist expression;
    ``why``: the cause, for the reason) in ``pool``; exclude those reaching
    ``HEADWAY_HOST_MAX_FAILED_STARTS`` in a row, each with a line in the master's log and in
    trial ``trial_id``'s log (run ``run_id``). Returns the nodes this call excluded, by name.
    A node list Slurm cannot expand counts nothing (logged)."""
    limit = settings.HEADWAY_HOST_MAX_FAILED_STARTS
    excluded: list[str] = []
    for name in _names(nodes):
        node, _ = SlurmNode.objects.get_or_create(namespace=namespace, pool=pool, name=name)
        rows = SlurmNode.objects.filter(id=node.id)
        rows.update(failed_starts=F("failed_starts") + 1)
        if limit <= 0:
            continue
        count = rows.values_list("failed_starts", flat=True).first() or 0
        reason = (
            f"excluded automatically: {count} runs in a row were lost on it before their ranks "
            f"started (HEADWAY_HOST_MAX_FAILED_STARTS {limit}); last: {why}"
        )[:500]
        # Conditional: a node already excluded keeps its first reason and time.
        if count >= limit and rows.filter(excluded_reason="").update(
            excluded_reason=reason, excluded_at=timezone.now()
        ):
            excluded.append(name)
            logger.error("Slurm node %s of pool %s: %s", name, pool, reason)
            TrialLog.objects.create(
                trial_id=trial_id,
                run_id=run_id,
                message=f"[headway] Slurm node {name} of pool {pool} {reason}; Headway's "
                f"jobs avoid it (--exclude) until an admin runs "
                f"`headway pool enable-node {pool} {name}`",
            )
    return excluded


def nodes_started(*, namespace: str, pool: str, nodes: str) -> None:
    """A run's ranks started on a job of ``pool`` on ``nodes`` (hostlist expression): those
    nodes' counts of failed starts begin again (an excluded node stays excluded)."""
    counted = SlurmNode.objects.filter(namespace=namespace, pool=pool, failed_starts__gt=0)
    # No scontrol call in the usual case (no node of the pool has a failed start counted).
    if not nodes or not counted.exists():
        return
    counted.filter(name__in=_names(nodes)).update(failed_starts=0)


def excluded_nodes(*, namespace: str, pool: str) -> list[str]:
    """The names of ``pool``'s excluded nodes, sorted: what its jobs' ``--exclude`` lists."""
    return list(
        SlurmNode.objects.filter(namespace=namespace, pool=pool)
        .exclude(excluded_reason="")
        .order_by("name")
        .values_list("name", flat=True)
    )


def node_enable(*, namespace: str, pool: str, name: str) -> SlurmNode:
    """An admin puts node ``name`` of ``pool`` back: not excluded, its count at 0; the pool's
    next jobs may run there. Enabling a node that is not excluded only resets its count.

    Raises:
        InvalidInput: ``name`` is not a node name (letters, digits, ``.``, ``_``, ``-``).
        SlurmNodeNotFound: Headway never counted a failed start on that node of that pool.
    """
    if not NODE_NAME.fullmatch(name):
        raise InvalidInput({"node": [f"{name[:200]!r} is not a Slurm node name"]})
    rows = SlurmNode.objects.filter(namespace=namespace, pool=pool, name=name)
    if not rows.update(failed_starts=0, excluded_reason="", excluded_at=None):
        raise SlurmNodeNotFound(
            f"Pool {pool} has no Slurm node {name} that Headway counted or excluded."
        )
    logger.warning("Slurm node %s of pool %s enabled by an admin", name, pool)
    return rows.get()
