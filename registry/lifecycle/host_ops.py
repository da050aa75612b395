"""An admin's operations on worker hosts: list, disable (or drain), enable and remove them.

As Determined's ``det agent disable [--drain] | enable``: a **draining** host takes no new run
and lets its running ones finish; a **disabled** one takes no new run and its running ones are
preempted (checkpoint, exit 0, resumed elsewhere from that checkpoint; not counted against
``max_restarts``, as a host's warm shutdown); **enable** makes it placeable again (also a host the master drained itself after runs kept
failing to start on it: ``registry.lifecycle._host_health``). Either way
the runs placed on it and not claimed yet are placed again elsewhere by the next pass
(``registry.scheduling._snapshot``). **Remove** forgets a host that holds no run and revokes its
token (docs/decisions/scheduling.md). REST (``/api/v1/hosts/``), ``headway host`` and the
dashboard's workers page all call these.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from registry import scheduling
from registry.errors import IllegalTransition, RegistryError
from registry.lifecycle._runs import trial_run_preempt
from registry.models import (
    HostAdminState,
    HostToken,
    RunShare,
    RunState,
    TrialLog,
    TrialRun,
    WorkerHost,
)
from registry.models.host import shares_holding_slots
from registry.pools import made_host_provider


class HostNotFound(RegistryError):
    """404: no registered host has this name."""

    status = 404


def host_status(host: WorkerHost, now: datetime | None = None) -> dict:
    """A host's ``HostStatus`` fields; ``host`` comes from ``scheduling.host_list()`` (it has
    ``slots_in_use`` and ``active_runs``)."""
    now = now or timezone.now()
    beat = host.heartbeat_at
    return {
        "name": host.name,
        "pool": host.pool,
        "state": host.admin_state,
        "reason": host.admin_reason,
        "alive": host.is_alive(now),
        "slots": host.slots,
        "slots_in_use": getattr(host, "slots_in_use", 0),
        "heartbeat_at": beat,
        "heartbeat_age_seconds": (now - beat).total_seconds() if beat else None,
        "started_at": host.started_at,
        "address": host.agent_address,
        "agent_pid": host.agent_pid,
        "agent_id": host.agent_id,
        "runs": [
            f"trial {run.trial_id} run {run.run_id}" for run in getattr(host, "active_runs", [])
        ],
    }


def host_statuses() -> list[dict]:
    """Every host (those pools made for one run included) as ``host_status``, by name."""
    now = timezone.now()
    return [host_status(host, now) for host in scheduling.host_list()]


def _get(name: str) -> WorkerHost:
    host = WorkerHost.objects.filter(name=name).first()
    if host is None:
        raise HostNotFound(f"No host named {name}.")
    if host.made_for_run_id is not None:
        note = made_host_provider(host.pool).made_host_note(host.made_for_run_id)
        raise IllegalTransition(f"Host {name} is {note}.")
    return host


def _status(name: str) -> dict:
    return host_status(scheduling.host_list().get(name=name))


def host_disable(name: str, *, drain: bool) -> dict:
    """Take host ``name`` out of placement; return its ``host_status``.

    ``drain``: its running runs finish there (DRAINING). Otherwise (DISABLED) each run holding
    its slots (its chief part or a share on it) is asked to checkpoint and stop
    (``trial_run_preempt``): its acknowledged exit 0 re-queues the trial, which resumes from
    that checkpoint on another host and is not charged a restart. A run that does not watch
    for preemption (no Headway SDK) runs until it ends. Idempotent.

    Raises:
        HostNotFound: (404) no such host.
        IllegalTransition: (409) a host its pool made for one run.
    """
    host = _get(name)
    state = HostAdminState.DRAINING if drain else HostAdminState.DISABLED
    WorkerHost.objects.filter(id=host.id).update(admin_state=state, admin_reason="")
    if not drain:
        _preempt_runs_on(host)
    # Runs placed on it and not claimed yet go elsewhere now, not at its next heartbeat.
    scheduling.request_placement(host.namespace)
    return _status(name)


def _preempt_runs_on(host: WorkerHost) -> None:
    shared = RunShare.objects.filter(shares_holding_slots(), host=host).values("run_id")
    runs = (
        TrialRun.objects.filter(Q(host=host) | Q(id__in=shared))
        .filter(state__in=[RunState.STARTING, RunState.RUNNING])
        .values_list("trial_id", "run_id")
    )
    for trial_id, run_id in runs:
        if trial_run_preempt(trial_id=trial_id, run_id=run_id):
            TrialLog.objects.create(
                trial_id=trial_id,
                run_id=run_id,
                message=(
                    f"[headway] host {host.name} disabled by an admin: run {run_id} checkpoints "
                    "and stops; the trial resumes on another host (not counted as a restart)"
                ),
            )


def host_enable(name: str) -> dict:
    """Make host ``name`` placeable again (ENABLED); return its ``host_status``. Idempotent.

    Raises:
        HostNotFound: (404) no such host.
        IllegalTransition: (409) a host its pool made for one run.
    """
    host = _get(name)
    # Back in service: a host drained automatically starts counting failed starts afresh.
    WorkerHost.objects.filter(id=host.id).update(
        admin_state=HostAdminState.ENABLED, admin_reason="", failed_starts=0
    )
    scheduling.request_placement(host.namespace)
    return _status(name)


def host_remove(name: str) -> dict:
    """Forget host ``name`` and revoke its live host token; return ``{"name", "token_revoked"}``.

    The token goes too: an agent still running with it would otherwise register the host again
    at its next heartbeat, undoing the removal; with its token revoked it stops and exits
    (``workers.hosts``). Issuing a new token brings the host back.

    Raises:
        HostNotFound: (404) no such host.
        IllegalTransition: (409) a run holds its slots (named; disable or drain it and wait),
            or it is a host its pool made for one run.
    """
    _get(name)
    with transaction.atomic():
        # The row lock conflicts with a placement pass writing a run onto this host (the
        # foreign key's share lock): either the pass commits first and the check below sees
        # its run, or the pass waits and then finds the host gone.
        host = WorkerHost.objects.select_for_update(no_key=True).get(name=name)
        runs = list(
            TrialRun.objects.filter(host=host)
            .exclude(state=RunState.EXITED)
            .order_by("trial_id", "run_id")
            .values_list("trial_id", "run_id")
        )
        shared = RunShare.objects.filter(shares_holding_slots(), host=host)
        runs += list(shared.values_list("run__trial_id", "run__run_id"))
        if runs:
            named = ", ".join(f"trial {t} run {r}" for t, r in sorted(set(runs)))
            raise IllegalTransition(
                f"Host {name} still holds runs: {named}; disable or drain it and wait for "
                "them to end."
            )
        host.delete()
        revoked = HostToken.objects.live().filter(name=name).update(revoked_at=timezone.now())
    return {"name": name, "token_revoked": bool(revoked)}
