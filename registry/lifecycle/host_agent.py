"""What a worker host does to the registry, behind the host agent's REST routes (issue #21).

Each function takes the calling host's name (its token's name) first and touches only what that
host may: its own host row, the runs placed on it (``TrialRun.host``) and its shares of runs
over several hosts (``RunShare.host``); anything else is ``NotPermitted`` (403), a run or share
that does not exist ``NotFound`` (404) (the checks: ``registry.lifecycle._host_access``). The
writes delegate to ``registry.scheduling`` for the host row, ``registry.lifecycle._runs`` for a
run's claim, state, heartbeat and exit, and ``registry.lifecycle._shares`` for a share's claim,
state, heartbeat and the rendezvous.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Length
from django.utils import timezone

from headway.client import wire
from registry import scheduling
from registry.authz import NotPermitted
from registry.errors import InvalidInput
from registry.lifecycle import _shares
from registry.lifecycle._host_access import (
    fresh_run,
    fresh_share,
    placed_run,
    placed_share,
)
from registry.lifecycle._log_batches import append_logs  # noqa: F401 (the agent routes' API)
from registry.lifecycle._runs import (
    trial_run_claim,
    trial_run_exited,
    trial_run_heartbeat,
    trial_run_preempt,
    trial_run_running,
)
from registry.models import (
    Checkpoint,
    Experiment,
    RunShare,
    RunState,
    TrialRun,
    WorkerHost,
)
from registry.models.host import alive_cutoff
from registry.pools import check_resource_pool

# -- the host itself ----------------------------------------------------------------------------


def host_queue(host: str, namespace: str | None = None) -> str:
    """Host ``host``'s Celery queue, ``<namespace>.host.<name>`` (default namespace: this
    master's ``HEADWAY_QUEUE``; as ``workers.hosts.host_queue``)."""
    return wire.host_queue_name(namespace or settings.CELERY_TASK_DEFAULT_QUEUE, host)


@transaction.atomic
def host_beat(
    host: str,
    *,
    pool: str,
    devices: Sequence[str],
    gpu: bool,
    started_at: datetime,
    namespace: str | None = None,
    redispatch: bool = False,
    runs: Sequence[dict] = (),
    shares: Sequence[dict] = (),
    agent_id: str = "",
    agent_pid: int | None = None,
    agent_address: str = "",
) -> tuple[WorkerHost, int, int]:
    """Register or heartbeat ``host`` (``scheduling.host_heartbeat``'s upsert); with
    ``redispatch`` (a worker's first beat) send again the runs placed on it and not claimed
    (``scheduling.host_redispatch``); then, only when the beat can make a placement possible
    that was not before (``_may_place``), request a placement pass.

    First the leases the host holds are renewed (``runs``: ``{"trial_id", "run_id"}``,
    ``shares``: with ``"node_rank"``; one UPDATE per table, as ``workers.leases.renew``): only
    those placed on ``host`` and not EXITED. ``namespace``: the cluster namespace the host
    serves (default: this master's ``HEADWAY_QUEUE``). The placement pass is that namespace's
    and never waits for a running one (``place_queued_runs(wait=False)``). A pass reads every
    waiting run, so the beat of an alive host whose slots, devices, gpu, pool and namespace are
    unchanged requests none: what frees or adds capacity otherwise requests its own (a run's
    exit, a queued run, a host enabled) and the reaper's periodic pass places what waited on
    time alone (a retry back-off).

    ``agent_id`` (with ``agent_pid``, ``agent_address``) names the agent process: a second
    agent of a host whose holder still heartbeats is refused before anything is renewed.

    One transaction. The first beat of a namespace served after no host of it was (the
    master's own outage) first renews every live lease of the namespace
    (``scheduling.resume_after_outage``). A beat listing a run or share the master already
    ended (``stale_leases``: the host was cut off and its run given away) leaves the host row's
    heartbeat time as it was, so the host is not placeable until it stopped them (fencing).

    Returns the host row, how many runs were sent again and how many leases were renewed.

    Raises:
        InvalidInput: (400, ``pool``) a pool the admin's pools file does not list.
        AgentConflict: (409) another agent instance holds the host (``host_heartbeat``).
    """
    if check_resource_pool(pool, field="pool").is_slurm and not _is_slurm_node(host):
        raise InvalidInput(
            {
                "pool": [
                    f"pool {pool!r} is a slurm pool: its hosts are the nodes of the Slurm jobs "
                    "the master submits; a host agent joins a pool of type agent"
                ]
            }
        )
    if agent_id:
        scheduling.host_agent_check(name=host, agent_id=agent_id)
    # The first beat served after the master's own outage renews every lease of the namespace.
    resumed = scheduling.resume_after_outage(namespace or settings.CELERY_TASK_DEFAULT_QUEUE)
    renewed = _renew_leases(host, runs, shares)
    fenced = any(stale_leases(host, runs, shares))
    # The row as it was, in one query: its heartbeat time (kept while fenced) and what decides
    # whether this beat changes what can be placed.
    previous = WorkerHost.objects.filter(name=host).values_list(*_PLACEABLE).first()
    before = previous[0] if previous is not None else None
    row = scheduling.host_heartbeat(
        name=host,
        pool=pool,
        namespace=namespace,
        queue=host_queue(host, namespace),
        slots=len(devices),
        devices=devices,
        gpu=gpu,
        started_at=started_at,
        agent_id=agent_id,
        agent_pid=agent_pid,
        agent_address=agent_address,
    )
    if fenced:
        # It still runs what the master gave away: no pass may place on its slots until it
        # stopped them (same transaction: no pass ever sees the refreshed row).
        WorkerHost.objects.filter(name=host).update(heartbeat_at=before)
        row.heartbeat_at = before
    resent = scheduling.host_redispatch(name=host) if redispatch else 0
    # A fenced beat refreshed nothing: no pass may see its slots yet. The first beat (and one
    # that renewed leases after the master's own outage) asks for one whatever it changed.
    if not fenced and (redispatch or resumed or _may_place(previous, row)):
        scheduling.request_placement(row.namespace, wait=False)
    return row, resent, renewed


# What a pass reads of a host row (``registry.scheduling._snapshot``): whether it is alive, and
# its capacity and eligibility. The leases a beat lists are not capacity: the runs' rows are.
_PLACEABLE = ("heartbeat_at", "slots", "devices", "gpu", "pool", "namespace")


def _may_place(previous: tuple | None, row: WorkerHost) -> bool:
    """Whether refreshing host row ``previous`` (``_PLACEABLE``'s fields; None: a new row) into
    ``row`` can make a placement possible that was not: the host was not alive before this beat
    (new, stopped, silent past ``HEADWAY_HOST_TIMEOUT_SECONDS``, or fenced until now), or its
    capacity or eligibility changed."""
    if previous is None or previous[0] is None or previous[0] < alive_cutoff():
        return True
    return tuple(previous[1:]) != tuple(getattr(row, field) for field in _PLACEABLE[1:])


def stale_leases(
    host: str, runs: Sequence[dict], shares: Sequence[dict]
) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The runs and shares a heartbeat of ``host`` listed that are placed on it and already
    EXITED: the master gave them away (lost) while the host could not reach it, so the host
    must stop them (fencing, ``HostInfo.stale_runs``). Only the host's own rows are looked at."""
    stale_runs: list[tuple[int, int]] = []
    if runs:
        found = Q(pk__in=[])
        for ref in runs:
            found |= Q(trial_id=ref["trial_id"], run_id=ref["run_id"])
        stale_runs = sorted(
            TrialRun.objects.filter(found, host__name=host, state=RunState.EXITED).values_list(
                "trial_id", "run_id"
            )
        )
    stale_shares: list[tuple[int, int, int]] = []
    if shares:
        found = Q(pk__in=[])
        for ref in shares:
            found |= Q(
                run__trial_id=ref["trial_id"], run__run_id=ref["run_id"], node_rank=ref["node_rank"]
            )
        stale_shares = sorted(
            RunShare.objects.filter(found, host__name=host, state=RunState.EXITED).values_list(
                "run__trial_id", "run__run_id", "node_rank"
            )
        )
    return stale_runs, stale_shares


def _is_slurm_node(host: str) -> bool:
    """Whether ``host`` is a node the master made for one of its Slurm jobs (registry.slurm)."""
    return WorkerHost.objects.filter(name=host, slurm_job__isnull=False).exists()


def _renew_leases(host: str, runs: Sequence[dict], shares: Sequence[dict]) -> int:
    """Renew the listed runs and shares that are placed on ``host`` (never another host's)."""
    run_ids = Q()
    for ref in runs:
        run_ids |= Q(trial_id=ref["trial_id"], run_id=ref["run_id"])
    share_ids = Q()
    for ref in shares:
        share_ids |= Q(
            run__trial_id=ref["trial_id"], run__run_id=ref["run_id"], node_rank=ref["node_rank"]
        )
    return scheduling.renew_leases(
        runs=run_ids & Q(host__name=host) if runs else None,
        shares=share_ids & Q(host__name=host) if shares else None,
    )


def host_timing() -> dict[str, float]:
    """The master's heartbeat interval, lease and kill grace (seconds), sent with every
    heartbeat answer: the host stops a run whose lease it could not renew by these, so the
    two sides never disagree on when a lease ends (``HostInfo``)."""
    return {
        "heartbeat_seconds": settings.HEADWAY_HOST_HEARTBEAT_SECONDS,
        "lease_seconds": settings.HEADWAY_LEASE_SECONDS,
        "kill_grace_seconds": settings.HEADWAY_KILL_GRACE_SECONDS,
        "outage_tolerance_seconds": settings.HEADWAY_OUTAGE_TOLERANCE_SECONDS,
    }


def host_stop(host: str) -> None:
    """The host's worker shuts down: no run is placed on it any more (``host_stopped``), and a
    placement pass is requested: the runs placed on it and not claimed yet move elsewhere."""
    scheduling.host_stopped(name=host)
    namespace = WorkerHost.objects.filter(name=host).values_list("namespace", flat=True).first()
    if namespace is not None:
        scheduling.request_placement(namespace, wait=False)


# -- runs placed on the host (the chief's part) -------------------------------------------------


def run_claim(host: str, trial_id: int, run_id: int, *, worker: str) -> bool:
    """Claim a run placed on ``host`` for ``worker`` (``trial_run_claim``); False when another
    delivery claimed it first or it is no longer runnable.

    Idempotent for one claimer: ``worker`` names one claim attempt (the host agent adds a
    random part to its process name), so the same request sent again after its answer was
    lost (the web server restarted) is answered True again while the run is STARTING for it,
    instead of leaving a claimed run that no process runs."""
    placed_run(host, trial_id, run_id)
    if trial_run_claim(trial_id=trial_id, run_id=run_id, worker=worker) is not None:
        return True
    return TrialRun.objects.filter(
        trial_id=trial_id, run_id=run_id, worker=worker, state=RunState.STARTING
    ).exists()


def run_running(host: str, trial_id: int, run_id: int) -> TrialRun:
    """The run's process started (``trial_run_running``)."""
    placed_run(host, trial_id, run_id)
    trial_run_running(trial_id=trial_id, run_id=run_id)
    return fresh_run(trial_id, run_id)


def run_heartbeat(host: str, trial_id: int, run_id: int) -> TrialRun:
    """The run's host is alive (``trial_run_heartbeat``); the answer carries its stop request."""
    placed_run(host, trial_id, run_id)
    trial_run_heartbeat(trial_id=trial_id, run_id=run_id)
    return fresh_run(trial_id, run_id)


def run_preempt(host: str, trial_id: int, run_id: int) -> TrialRun:
    """The host's worker shuts down: ask the run to checkpoint and stop (``trial_run_preempt``)."""
    placed_run(host, trial_id, run_id)
    trial_run_preempt(trial_id=trial_id, run_id=run_id)
    return fresh_run(trial_id, run_id)


def run_exit(
    host: str, trial_id: int, run_id: int, *, exit_code: int | None, reason: str = ""
) -> TrialRun:
    """Record the run's exit (``trial_run_exited``; ``None``: stopped by the host, not by the
    trial's code, ``reason`` saying why) and let the lifecycle decide what is next. A repeated
    report changes nothing."""
    placed_run(host, trial_id, run_id)
    trial_run_exited(trial_id=trial_id, run_id=run_id, exit_code=exit_code, reason=reason)
    return fresh_run(trial_id, run_id)


def run_token(host: str, trial_id: int, run_id: int) -> str:
    """The run's trial-scoped token, for the processes the host starts; only while the run is
    not EXITED (an ended run's token authenticates nothing anyway).

    Raises:
        NotPermitted: (403) as ``placed_run``, or the run has exited.
    """
    run = placed_run(host, trial_id, run_id)
    if run.state == RunState.EXITED:
        raise NotPermitted(f"Run {run_id} of trial {trial_id} has exited.")
    return run.token


def share_token(host: str, trial_id: int, run_id: int, node_rank: int) -> str:
    """The run's token for the ranks of this host's share (as ``run_token``)."""
    share = placed_share(host, trial_id, run_id, node_rank)
    if share.run.state == RunState.EXITED:
        raise NotPermitted(f"Run {run_id} of trial {trial_id} has exited.")
    return share.run.token


def launch_spec(host: str, trial_id: int, run_id: int, node_rank: int = 0) -> dict:
    """What ``host`` needs to start its part of the run: the chief's (``node_rank`` 0) or its
    share's. Keys as ``headway.client.LaunchSpec`` (the same fields as the cluster info the
    worker writes for the SDK, plus this part's slots and the run's other parts)."""
    if node_rank:
        share = placed_share(host, trial_id, run_id, node_rank)
        run, part_slots, part_devices = share.run, share.slots, share.devices
        part_host = share.host
    else:
        run = placed_run(host, trial_id, run_id)
        part_slots, part_devices, part_host = run.slots, run.devices, run.host
    trial = run.trial
    latest = trial.latest_checkpoint or trial.warm_start_checkpoint
    latest_steps = None
    if latest is not None:
        # A warm start's checkpoint belongs to the source trial: look it up by uuid alone.
        latest_steps = (
            Checkpoint.objects.filter(uuid=latest).values_list("steps_completed", flat=True).first()
        )
    shares = [
        {"node_rank": rank, "host": name, "slots": slots, "devices": list(devices or [])}
        for rank, name, slots, devices in RunShare.objects.filter(run=run).values_list(
            "node_rank", "host__name", "slots", "devices"
        )
    ]
    archive_size = (
        Experiment.objects.filter(id=trial.experiment_id)
        .annotate(size=Length("model_definition"))
        .values_list("size", flat=True)
        .first()
    )
    return {
        "experiment_id": trial.experiment_id,
        "trial_id": trial.id,
        "run_id": run.run_id,
        "node_rank": node_rank,
        "hparams": trial.hparams,
        "trial_seed": trial.seed,
        "experiment_config": trial.experiment.config,
        "latest_checkpoint": str(latest) if latest else None,
        "latest_checkpoint_steps": latest_steps,
        "searcher_length": run.searcher_length,
        "slots": part_slots,
        "devices": [str(device) for device in part_devices or []],
        "gpu": bool(part_host is not None and part_host.gpu),
        "run_slots": run.slots,
        "shares": shares,
        "chief_host": run.host.name if run.host is not None else None,
        "model_definition_bytes": archive_size or 0,
    }


def model_definition(host: str, trial_id: int, run_id: int, node_rank: int = 0) -> bytes:
    """The experiment's model definition archive (tar.gz) for a run (or share) on ``host``."""
    if node_rank:
        run = placed_share(host, trial_id, run_id, node_rank).run
    else:
        run = placed_run(host, trial_id, run_id)
    archive = (
        Experiment.objects.filter(id=run.trial.experiment_id)
        .values_list("model_definition", flat=True)
        .get()
    )
    return bytes(archive)


# -- runs over several hosts: the chief's view, and this host's shares ---------------------------


def _plan(run: TrialRun, node_rank: int, rendezvous: str) -> dict:
    slots = list(RunShare.objects.filter(run=run).values_list("slots", flat=True))
    address, _, port = rendezvous.rpartition(":")
    return {
        "ready": bool(rendezvous),
        "run_state": run.state,
        "address": address or None,
        "port": int(port) if rendezvous else None,
        "nnodes": 1 + len(slots),
        "node_rank": node_rank,
        "total_slots": (run.slots or 1) + sum(slots),
    }


def run_publish_rendezvous(
    host: str, trial_id: int, run_id: int, *, address: str, port: int
) -> dict:
    """The chief's host publishes where its run's hosts meet (``address:port``) to every share;
    returns the chief's plan (``headway.client.Rendezvous``)."""
    run = placed_run(host, trial_id, run_id)
    endpoint = f"{address}:{port}"
    _shares.shares_publish_rendezvous(run.id, endpoint)
    return _plan(run, 0, endpoint)


def run_shares(host: str, trial_id: int, run_id: int) -> list[dict]:
    """The run's shares as its chief's host watches them: state, exit code, last heartbeat
    and the ``problem`` judged here, on the master's clock (``share_problem``)."""
    run = placed_run(host, trial_id, run_id)
    now = timezone.now()
    # A lease older than this: its ranks are gone (the master's own outage not counted).
    lapsed, _ = scheduling.lease_cutoff(run.namespace, now)
    unrenewed = now - timedelta(seconds=settings.HEADWAY_LEASE_SECONDS)
    shares = []
    for rank, name, state, code, beat, host_beat in RunShare.objects.filter(run=run).values_list(
        "node_rank", "host__name", "state", "exit_code", "heartbeat_at", "host__heartbeat_at"
    ):
        where = f"node {rank} (host {name})"
        problem = ""
        if state == RunState.EXITED and code is None:
            problem = f"lost: host {name} lost: {where} stopped without an exit code"
        elif state == RunState.EXITED and code != 0:
            problem = f"failed: {where} exited with code {code}"
        elif state == RunState.QUEUED and (host_beat is None or host_beat < unrenewed):
            # Its host stopped, or has renewed nothing for a lease: the share cannot start.
            problem = f"lost: host {name} lost: {where} cannot start"
        elif state in (RunState.STARTING, RunState.RUNNING) and beat is not None and beat < lapsed:
            problem = f"lost: host {name} lost: {where} stopped heartbeating (its lease lapsed)"
        shares.append(
            {
                "node_rank": rank,
                "host": name,
                "state": state,
                "exit_code": code,
                "heartbeat_at": beat,
                "problem": problem,
            }
        )
    return shares


def share_claim(host: str, trial_id: int, run_id: int, node_rank: int, *, worker: str) -> bool:
    """Claim this host's share for ``worker`` (a conditional UPDATE: one delivery gets in);
    False when it was claimed already or its run ended (idempotent for one claimer, as
    ``run_claim``)."""
    share = placed_share(host, trial_id, run_id, node_rank)
    if _shares.share_claim(trial_id=trial_id, run_id=run_id, node_rank=node_rank, worker=worker):
        return True
    # The same claim sent again after its answer was lost (as ``run_claim``).
    return RunShare.objects.filter(id=share.id, worker=worker, state=RunState.STARTING).exists()


def share_rendezvous(host: str, trial_id: int, run_id: int, node_rank: int) -> dict:
    """The share's plan once the chief published its address (``ready``), with the run's state
    (a share stops waiting when it is EXITED); asking heartbeats the share, as waiting did."""
    share = placed_share(host, trial_id, run_id, node_rank)
    share_heartbeat(host, trial_id, run_id, node_rank)
    return _plan(share.run, node_rank, share.rendezvous)


def share_running(host: str, trial_id: int, run_id: int, node_rank: int) -> RunShare:
    """The share's processes started."""
    share = placed_share(host, trial_id, run_id, node_rank)
    _shares.share_running(share.id)
    return fresh_share(share)


def share_heartbeat(host: str, trial_id: int, run_id: int, node_rank: int) -> RunShare:
    """The share's host is alive; the answer carries the run's state and stop request (a share
    stops its ranks at once on "kill", after the grace period once the run EXITED)."""
    share = placed_share(host, trial_id, run_id, node_rank)
    _shares.share_heartbeat(share.id)
    return fresh_share(share)


def share_exit(
    host: str, trial_id: int, run_id: int, node_rank: int, *, exit_code: int | None
) -> RunShare:
    """Record the share's exit (``None``: stopped by its host's shutdown or never started); a
    repeated report changes nothing. Once its run has EXITED too the share's slots are free,
    so a placement pass is requested (the run's exit requested one while they were held)."""
    share = placed_share(host, trial_id, run_id, node_rank)
    _shares.share_exited(share.id, exit_code)
    share = fresh_share(share)
    if share.run.state == RunState.EXITED:
        # A share holds its host's slots past its run's exit while its ranks run: free now.
        scheduling.request_placement(share.run.namespace, wait=False)
    return share
