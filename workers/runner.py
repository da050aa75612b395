"""Runs one trial run on this host: claim, unpack, launch, stream logs, report the exit.

Steps:
1. Claim the run (conditional UPDATE; a duplicate or redelivered task stops here).
2. Unpack the experiment's model definition into a fresh ``<work>/trial-<id>-run-<n>/code``.
3. Write the cluster-info JSON the SDK reads and start the entrypoint as a subprocess in its
   own session (process group), with ``HEADWAY_*`` variables and a trial-scoped token. A
   ``module:Class`` entrypoint runs under ``headway.exec.harness``; when the run holds more
   than one slot (``run.slots``, plus the shares of a run over several hosts) it is wrapped in
   ``headway.launch.torch_distributed --trial module:Class`` (one process per slot). A shell
   command runs as given: it names the launcher itself, as in Determined.
4. Copy stdout/stderr into ``TrialLog`` rows in batches, heartbeat while it runs
   (``workers.run_loop``).
5. Report the exit code to ``registry.lifecycle``, which decides what happens next.

A run over several hosts (``workers.distributed``): the chief host's worker does the above;
every other host's worker runs its share (``run_trial_share``): claim the share, wait for the
chief's rendezvous address, then steps 2-4 for its own ranks, and record the share's exit.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from django.conf import settings

from headway.archive import check_model_definition_isolated, extract_model_definition
from headway.expconf import EnvironmentConfig, parse_experiment_config
from headway.launch._network import HostAddressError, socket_ifname_environment
from registry import lifecycle
from registry.models import Checkpoint, Experiment, RunShare, TrialRun
from workers import db_outage, distributed, isolation, leases, shared_storage, supervision
from workers.address import host_address
from workers.distributed import NodePlan
from workers.run_loop import EOF as _EOF  # noqa: F401 (tests put it on a lines queue)
from workers.run_loop import LogWriter as _LogWriter
from workers.run_loop import pump as _pump
from workers.run_loop import supervise as _supervise
from workers.run_loop import supervise_share as _supervise_share

logger = logging.getLogger("headway.worker")


def worker_name() -> str:
    """This worker's name as stored on the runs it claims."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _cluster_info(run: TrialRun) -> dict:
    trial = run.trial
    experiment = trial.experiment
    latest = trial.latest_checkpoint or trial.warm_start_checkpoint
    latest_steps = None
    if latest is not None:
        # A warm start's checkpoint belongs to the source trial: look it up by uuid alone.
        latest_steps = (
            Checkpoint.objects.filter(uuid=latest).values_list("steps_completed", flat=True).first()
        )
    return {
        "master_url": settings.HEADWAY_MASTER_URL,
        "token": run.token,
        "experiment_id": experiment.id,
        "trial_id": trial.id,
        "run_id": run.run_id,
        "hparams": trial.hparams,
        "trial_seed": trial.seed,
        "latest_checkpoint": str(latest) if latest else None,
        "latest_checkpoint_steps": latest_steps,
        "searcher_length": run.searcher_length,
        "experiment_config": experiment.config,
    }


STARTUP_HOOK = "startup-hook.sh"


def _command(
    entrypoint: str | list[str], is_trial_class: bool, slots: int = 1, code_dir: Path | None = None
) -> list[str]:
    """The process to start: a trial class under the harness (under the launcher with several
    slots), a shell command as given, a list as the argv itself (no shell, as Determined runs
    a list entrypoint; the program is looked up on the trial's ``PATH``).

    When the model definition has a ``startup-hook.sh`` at its top, it is sourced by bash in
    the trial's working directory first (Determined's hook: install packages, export
    variables the entrypoint sees); if it fails, the entrypoint does not start.
    """
    if isinstance(entrypoint, list):
        command = list(entrypoint)
    elif is_trial_class and slots > 1:
        command = [sys.executable, "-m", "headway.launch.torch_distributed", "--trial", entrypoint]
    elif is_trial_class:
        command = [sys.executable, "-m", "headway.exec.harness", entrypoint]
    else:
        command = ["/bin/sh", "-c", entrypoint]
    if code_dir is not None and (code_dir / STARTUP_HOOK).is_file():
        hook = f'set -e; source ./{STARTUP_HOOK}; set +e; exec "$@"'
        return ["/bin/bash", "-c", hook, STARTUP_HOOK, *command]
    return command


def _config_variables(config: dict[str, Any], device: Literal["cpu", "cuda"]) -> dict[str, str]:
    """``environment.environment_variables`` of a stored config for a host with ``device`` slots
    (validated at submission; ``headway.expconf.EnvironmentConfig``)."""
    raw = config.get("environment") or {}
    return EnvironmentConfig.model_validate(raw).variables(device)


def _environment(
    run: TrialRun,
    info_path: Path,
    node: NodePlan | None = None,
    share: RunShare | None = None,
    user: isolation.TrialUser | None = None,
) -> dict[str, str]:
    """The trial process's environment on this host (``share``: a non-chief host's part;
    ``user``: the ``HEADWAY_TRIAL_USER`` it runs as)."""
    node = node or NodePlan(total_slots=max(run.slots, 1))
    part = share if share is not None else run
    # An allow-list of the worker's environment: never its secrets (workers/isolation.py).
    config = run.trial.experiment.config or {}
    storage = config.get("checkpoint_storage") or {}
    env = isolation.trial_base_environment(
        os.environ,
        storage_type=str(storage.get("type") or ""),
        extra=settings.HEADWAY_TRIAL_ENV,
    )
    # The config's environment.environment_variables (by device type), before Headway's own.
    on_gpu = part.host is not None and part.host.gpu
    env.update(_config_variables(config, "cuda" if on_gpu else "cpu"))
    # `python` in a shell entrypoint must be the interpreter that has headway installed.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(
        {
            "HEADWAY_MASTER": settings.HEADWAY_MASTER_URL,
            "HEADWAY_TOKEN": run.token,
            "HEADWAY_TRIAL_ID": str(run.trial_id),
            "HEADWAY_RUN_ID": str(run.run_id),
            "HEADWAY_EXPERIMENT_ID": str(run.trial.experiment_id),
            "HEADWAY_CLUSTER_INFO": str(info_path),
            "PYTHONUNBUFFERED": "1",
        }
    )
    threads = settings.HEADWAY_THREADS_PER_SLOT
    if threads:
        # One process with every slot of this host; the launcher gives each rank its own share.
        env["HEADWAY_THREADS_PER_SLOT"] = str(threads)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads * max(part.slots, 1))
    devices = ",".join(str(device) for device in part.devices or [])
    if devices:
        # The slots placement assigned on this host; on a GPU host they are CUDA device ids.
        env["HEADWAY_SLOT_IDS"] = devices
        if part.host is not None and part.host.gpu:
            env["CUDA_VISIBLE_DEVICES"] = devices
    # Read by headway.launch.torch_distributed: this host's place among the run's hosts.
    env["HEADWAY_NUM_NODES"] = str(node.nnodes)
    env["HEADWAY_NODE_RANK"] = str(node.node_rank)
    env["HEADWAY_CHIEF_IP"] = node.chief_addr
    if node.port is not None:
        env["HEADWAY_RDZV_PORT"] = str(node.port)
    address = _host_address(node)
    if address:
        # Where this host's ranks meet the others' (torchrun's --local-addr, gloo, NCCL).
        env["HEADWAY_HOST_ADDRESS"] = address
        interfaces = socket_ifname_environment(address, env, os.environ)
        for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            if var in interfaces:
                env[var] = interfaces[var]
    if user is not None:
        env.update({"HOME": user.home, "USER": user.name, "LOGNAME": user.name})
    return env


def _host_address(node: NodePlan) -> str:
    """This host's advertised address for the run's ranks (``workers.address``); "" when
    none is found and the run is on one host, which needs none (nor the host name to
    resolve). The ranks' ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` name the interface
    owning it unless the user set them (the worker's allowed variables, the experiment's
    ``environment_variables``, or the worker's own environment).

    Raises:
        HostAddressError: over several hosts, when this host's address is wrong or unknown.
    """
    try:
        return host_address()
    except HostAddressError:
        if node.nnodes > 1:
            raise
        return ""


def run_trial(trial_id: int, run_id: int) -> int | None:
    """Run ``run_id`` of trial ``trial_id`` to its end; return the exit code.

    None when the run was not claimed, or when it was stopped by this worker's shutdown or
    because another host of the run was lost (reported as lost: the trial is re-queued).
    """
    if supervision.shutting_down.is_set():
        # Delivered during this worker's warm shutdown: leave the run unclaimed; placement
        # gives it to another host (the host was marked stopped), and the shutdown is not held
        # up by a trial that would start only to be preempted.
        logger.info("trial %s run %s not claimed: this worker is shutting down", trial_id, run_id)
        return None
    claimed = time.monotonic()  # the claim starts this host's lease (workers/leases.py)
    run = lifecycle.trial_run_claim(trial_id=trial_id, run_id=run_id, worker=worker_name())
    if run is None:
        logger.info("trial %s run %s already claimed or no longer runnable", trial_id, run_id)
        return None
    lease = leases.hold(leases.RUN, run.id, trial_id, run_id, claimed)
    try:
        return _run_claimed(run, lease)
    finally:
        leases.release(lease)


def _run_claimed(run: TrialRun, lease: leases.Lease) -> int | None:
    trial_id, run_id = run.trial_id, run.run_id
    logs = _LogWriter(trial_id, run_id)
    run_dir = settings.HEADWAY_WORK_DIR / f"trial-{trial_id}-run-{run_id}"
    exit_code: int | None
    watch = distributed.ShareWatch(run)
    try:
        node = distributed.chief_plan(run, shared_storage.marker_writer(run))
        exit_code = _launch_and_wait(run, run_dir, logs, node, watch=watch, lease=lease)
    except Exception as exc:  # a failure to launch is the trial's failure, not the worker's
        logger.exception("trial %s run %s could not be launched", trial_id, run_id)
        logs.add(f"[headway] could not launch the trial: {exc}")
        exit_code = 1
    shared_storage.forget(run)  # the other hosts read the marker before their ranks started
    reason = ""  # what lost the run, for its trial's message (registry.lifecycle)
    host = settings.HEADWAY_HOST_NAME
    if exit_code != 0 and supervision.shutting_down.is_set():
        # Stopped because this worker is going away: the trial's fault is not in it.
        logs.add(f"[headway] run {run_id} stopped by the worker's shutdown (code {exit_code})")
        exit_code, reason = None, f"host {host} shut down"
    if lease.expired:
        # Stopped by this host for want of a lease: an infrastructure failure, not the trial's.
        logs.add(f"[headway] run {run_id} stopped: {lease.expired} (code {exit_code})")
        exit_code, reason = None, f"host {host} lost its lease"
    else:
        exit_code = watch.final_exit_code(exit_code, logs.add)
        if exit_code is None and watch.problem is not None:
            reason = reason or watch.problem[1]
    logs.add(f"[headway] run {run_id} exited with code {exit_code}")
    # The exit must be recorded even across a database restart (workers/db_outage.py).
    budget = settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS
    db_outage.retry_database(logs.flush, budget=budget, what="trial logs")
    db_outage.retry_database(
        lambda: lifecycle.trial_run_exited(
            trial_id=trial_id, run_id=run_id, exit_code=exit_code, reason=reason
        ),
        budget=budget,
        what=f"trial {trial_id} run {run_id} exit",
    )
    if exit_code == 0 and not os.environ.get("HEADWAY_KEEP_WORKDIRS"):
        shutil.rmtree(run_dir, ignore_errors=True)
    return exit_code


def run_trial_share(trial_id: int, run_id: int, node_rank: int) -> int | None:
    """Run this host's share ``node_rank`` of a run over several hosts; return its exit code.

    None when the share was not claimed (already claimed, or its run ended), or when the run
    ended before the chief published its rendezvous address.
    """
    if supervision.shutting_down.is_set():
        logger.info(
            "trial %s run %s node %s not claimed: shutting down", trial_id, run_id, node_rank
        )
        return None
    claimed = time.monotonic()
    share = distributed.claim_share(trial_id, run_id, node_rank, worker_name())
    if share is None:
        logger.info("trial %s run %s node %s: already claimed or over", trial_id, run_id, node_rank)
        return None
    lease = leases.hold(leases.SHARE, share.id, trial_id, run_id, claimed)
    try:
        return _run_claimed_share(share, lease)
    finally:
        leases.release(lease)


def _run_claimed_share(share: RunShare, lease: leases.Lease) -> int | None:
    trial_id, run_id, node_rank = share_ids(share)
    logs = _LogWriter(trial_id, run_id)
    node = distributed.wait_for_rendezvous(share)
    if node is None:
        logs.add(f"[headway] run {run_id} node {node_rank}: the run ended before it started")
        logs.flush()
        distributed.share_exited(share, None)
        return None
    run = TrialRun.objects.select_related("trial__experiment", "host").get(id=share.run_id)
    run_dir = settings.HEADWAY_WORK_DIR / f"trial-{trial_id}-run-{run_id}-node-{node_rank}"
    exit_code: int | None
    try:
        shared_storage.check_share(run, share, node)
        exit_code = _launch_and_wait(run, run_dir, logs, node, share=share, lease=lease)
    except shared_storage.SharedStorageRefused as exc:
        logs.add(f"[headway] {exc}")
        exit_code = 1
    except Exception as exc:
        logger.exception("trial %s run %s node %s could not be launched", *share_ids(share))
        logs.add(f"[headway] node {node_rank} could not launch: {exc}")
        exit_code = 1
    if exit_code != 0 and supervision.shutting_down.is_set():
        exit_code = None
    if lease.expired:
        logs.add(f"[headway] node {node_rank} stopped: {lease.expired} (code {exit_code})")
        exit_code = None
    logs.add(f"[headway] run {run_id} node {node_rank} exited with code {exit_code}")
    budget = settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS
    db_outage.retry_database(logs.flush, budget=budget, what="trial logs")
    db_outage.retry_database(
        lambda: distributed.share_exited(share, exit_code),
        budget=budget,
        what=f"trial {trial_id} run {run_id} node {node_rank} exit",
    )
    if exit_code == 0 and not os.environ.get("HEADWAY_KEEP_WORKDIRS"):
        shutil.rmtree(run_dir, ignore_errors=True)
    return exit_code


def share_ids(share: RunShare) -> tuple[int, int, int]:
    """``(trial_id, run_id, node_rank)`` of a share, for messages."""
    return share.run.trial_id, share.run.run_id, share.node_rank


def _launch_and_wait(
    run: TrialRun,
    run_dir: Path,
    logs: _LogWriter,
    node: NodePlan | None = None,
    *,
    share: RunShare | None = None,
    watch: distributed.ShareWatch | None = None,
    lease: leases.Lease | None = None,
) -> int:
    node = node or NodePlan(total_slots=max(run.slots, 1))
    shutil.rmtree(run_dir, ignore_errors=True)
    code_dir = run_dir / "code"
    code_dir.mkdir(parents=True)
    experiment = Experiment.objects.only("model_definition", "config").get(
        id=run.trial.experiment_id
    )
    archive = bytes(experiment.model_definition)
    # The same bounded check as at upload (time- and memory-limited child), then the unpacking.
    check_model_definition_isolated(
        archive,
        max_bytes=settings.HEADWAY_MAX_MODEL_DEF_BYTES,
        timeout=settings.HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS,
        memory_bytes=settings.HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES,
    )
    extract_model_definition(archive, str(code_dir))
    info_path = run_dir / "cluster_info.json"
    info_path.write_text(json.dumps(_cluster_info(run)))
    user = isolation.trial_user()
    if user is not None:
        isolation.lock_down_worker_files(user, database_file=isolation.sqlite_database_file())
        isolation.hand_over(run_dir, user)
    config = parse_experiment_config(experiment.config)
    entrypoint = config.entrypoint
    is_trial_class = config.entrypoint_trial_class is not None
    where = f"node {node.node_rank} of {node.nnodes} " if node.nnodes > 1 else ""
    logs.add(
        f"[headway] run {run.run_id} of trial {run.trial_id} starting {where}on {worker_name()}:"
        f" {config.entrypoint_text}"
    )
    if lease is not None:
        lease.publish(run_dir / "lease")  # the guard's backstop (headway.exec.guard)
    process = subprocess.Popen(
        supervision.guarded(
            _command(entrypoint, is_trial_class, node.total_slots, code_dir),
            lease_file=str(run_dir / "lease") if lease is not None else None,
        ),
        cwd=code_dir,
        env=_environment(run, info_path, node, share, user),
        user=user.uid if user is not None else None,
        group=user.gid if user is not None else None,
        extra_groups=[] if user is not None else None,
        umask=isolation.TRIAL_UMASK if user is not None else -1,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,  # own process group, so the whole tree can be signalled
    )
    # The process runs now: a database restart at this moment must not orphan it.
    db_outage.retry_database(
        (lambda: lifecycle.trial_run_running(trial_id=run.trial_id, run_id=run.run_id))
        if share is None
        else (lambda: distributed.share_running(share)),
        budget=settings.HEADWAY_HEARTBEAT_TIMEOUT_SECONDS,
        what=f"trial {run.trial_id} run {run.run_id} running",
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    killer = supervision.ProcessGroupKiller(process, settings.HEADWAY_KILL_GRACE_SECONDS)
    supervision.register(run.trial_id, run.run_id, killer)
    if lease is not None:
        leases.attach(lease, killer, logs.add)
    try:
        if share is None:
            _supervise(run, killer, lines, logs, watch=watch, lease=lease)
        else:
            _supervise_share(share, killer, lines, logs, lease=lease)
    finally:
        supervision.unregister(run.trial_id, run.run_id)
    return process.wait()
