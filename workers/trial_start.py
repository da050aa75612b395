"""Starting a run's processes on this host (step 3 of ``workers.runner``): unpack the model
definition into a fresh run folder, write the cluster-info JSON the SDK reads, and start the
entrypoint under ``headway.exec.guard`` in its own process group, with the ``HEADWAY_*``
variables and the run's trial-scoped token (``workers.launch``). A run a restarted agent may
re-attach (``workers.reattach``) writes its output to a file in its folder; any other to a pipe.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from headway.archive import check_model_definition_isolated, extract_model_definition
from headway.client import wire
from headway.expconf import config_json
from workers import agent_state, isolation, launch, leases, link, reattach, supervision
from workers.config import settings
from workers.distributed import NodePlan
from workers.run_loop import LogWriter


def _worker_name() -> str:
    from workers.runner import worker_name

    return worker_name()


def _cluster_info(spec: wire.LaunchSpec, token: str) -> dict[str, Any]:
    """The cluster-info JSON the SDK reads (``HEADWAY_CLUSTER_INFO``)."""
    return {
        "master_url": settings.HEADWAY_MASTER_URL,
        "token": token,
        "experiment_id": spec.experiment_id,
        "trial_id": spec.trial_id,
        "run_id": spec.run_id,
        "hparams": spec.hparams,
        "trial_seed": spec.trial_seed,
        "latest_checkpoint": spec.latest_checkpoint,
        "latest_checkpoint_steps": spec.latest_checkpoint_steps,
        "searcher_length": spec.searcher_length,
        "experiment_config": config_json(spec.experiment_config),
    }


def start(
    spec: wire.LaunchSpec,
    run_dir: Path,
    logs: LogWriter,
    node: NodePlan,
    lease: leases.Lease | None,
) -> subprocess.Popen[str]:
    """Unpack the model definition into a fresh ``run_dir`` and start the entrypoint; return
    its process. Whatever fails here, the run's ranks never started."""
    trial_id, run_id, node_rank = spec.trial_id, spec.run_id, spec.node_rank
    shutil.rmtree(run_dir, ignore_errors=True)
    code_dir = run_dir / "code"
    code_dir.mkdir(parents=True)
    api = link.api()
    if node_rank:
        archive = api.share_model_definition(trial_id, run_id, node_rank)
        token = api.share_token(trial_id, run_id, node_rank)
    else:
        archive = api.run_model_definition(trial_id, run_id)
        token = api.run_token(trial_id, run_id)
    # The same bounded check as at upload (time- and memory-limited child), then the unpacking.
    check_model_definition_isolated(
        archive,
        max_bytes=settings.HEADWAY_MAX_MODEL_DEF_BYTES,
        timeout=settings.HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS,
        memory_bytes=settings.HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES,
    )
    extract_model_definition(archive, str(code_dir))
    info_path = run_dir / "cluster_info.json"
    info_path.write_text(json.dumps(_cluster_info(spec, token)))
    user = isolation.trial_user()
    if user is not None:
        isolation.lock_down_worker_files(user)
        isolation.hand_over(run_dir, user)
    config = spec.experiment_config
    is_trial_class = config.entrypoint_trial_class is not None
    where = f"node {node.node_rank} of {node.nnodes} " if node.nnodes > 1 else ""
    logs.add(
        f"[headway] run {run_id} of trial {trial_id} starting {where}on {_worker_name()}:"
        f" {config.entrypoint_text}"
    )
    if lease is not None:
        lease.publish(run_dir / "lease")  # the guard's backstop (headway.exec.guard)
    command = launch.command(config.entrypoint, is_trial_class, node.total_slots, code_dir)
    lease_file = str(run_dir / "lease") if lease is not None else None
    if _reattachable(spec, node, lease):
        # It may outlive this agent: output to a file, not a pipe (workers.reattach).
        reattach.name_agent(run_dir)
        with open(run_dir / agent_state.OUTPUT, "ab") as output:
            return _popen(
                supervision.guarded(command, lease_file, run_dir=run_dir),
                code_dir, spec, token, info_path, node, user, output,
            )  # fmt: skip
    return _popen(
        supervision.guarded(command, lease_file),
        code_dir, spec, token, info_path, node, user, subprocess.PIPE,
    )  # fmt: skip


def _reattachable(spec: wire.LaunchSpec, node: NodePlan, lease: leases.Lease | None) -> bool:
    """Whether a restarted agent could re-attach this run: the chief's part of a run on this
    host alone, under a Celery agent that keeps a state file, re-attachment not turned off."""
    return (
        lease is not None
        and spec.node_rank == 0
        and node.nnodes == 1
        and settings.HEADWAY_REATTACH_SECONDS > 0
        and agent_state.active()
        and not supervision.in_batch_job_node()
    )


def _popen(
    command: list[str],
    code_dir: Path,
    spec: wire.LaunchSpec,
    token: str,
    info_path: Path,
    node: NodePlan,
    user: Any,
    stdout: Any,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        cwd=code_dir,
        env=launch.environment(spec, token, info_path, node, user),
        user=user.uid if user is not None else None,
        group=user.gid if user is not None else None,
        extra_groups=[] if user is not None else None,
        umask=isolation.TRIAL_UMASK if user is not None else -1,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,  # own process group, so the whole tree can be signalled
    )
