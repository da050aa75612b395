"""What a worker host does to the registry, behind the host agent's REST routes.

Each function takes the calling host's name (its token's name) first and touches only what that
host may: its own host row, the runs placed on it (``TrialRun.host``) and its shares of runs
over several hosts (``RunShare.host``); anything else is ``NotPermitted`` (403), a run or share
that does not exist ``NotFound`` (404) (the checks: ``registry.lifecycle._host_access``). The
writes delegate to ``registry.scheduling`` for the host row, ``registry.lifecycle._runs`` for a
run's claim, state, heartbeat and exit, and ``registry.lifecycle._shares`` for a share's claim,
state, heartbeat and the rendezvous.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models.functions import Length
from django.utils import timezone

from registry import scheduling
from registry.authz import NotPermitted
from registry.lifecycle import _shares
from registry.lifecycle._host_access import (
    fresh_run,
    fresh_share,
    placed_run,
    placed_share,
)

# -- the host itself ----------------------------------------------------------------------------
from registry.lifecycle._host_beat import (  # noqa: F401 (the agent routes' API)
    host_beat,
    host_queue,
    host_stop,
    host_timing,
    stale_leases,
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
)


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
    worker writes for the SDK, plus this part's slots and the run's other parts);
    ``experiment_config`` is the ``ExperimentConfig`` model (``Experiment.conf``).

    Raises:
        StoredConfigInvalid: the stored config no longer validates (such a run is never
            placed: ``registry.scheduling.run_resources``).
    """
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
        # The validated config (wire.LaunchSpec sends the stored JSON, as stored).
        "experiment_config": trial.experiment.conf,
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
    for rank, name, state, code, beat, host_beat_at in RunShare.objects.filter(run=run).values_list(
        "node_rank", "host__name", "state", "exit_code", "heartbeat_at", "host__heartbeat_at"
    ):
        where = f"node {rank} (host {name})"
        problem = ""
        if state == RunState.EXITED and code is None:
            problem = f"lost: host {name} lost: {where} stopped without an exit code"
        elif state == RunState.EXITED and code != 0:
            problem = f"failed: {where} exited with code {code}"
        elif state == RunState.QUEUED and (host_beat_at is None or host_beat_at < unrenewed):
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
