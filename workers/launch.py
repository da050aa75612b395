"""What a trial process is started with on its host: the command line and the environment.

``workers.runner`` calls ``command`` and ``environment`` with the run's launch spec (from the
master: ``headway.client.wire.LaunchSpec``) and its place among the run's hosts
(``workers.distributed.NodePlan``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

from headway.client import wire
from headway.expconf import ExperimentConfig, S3Config, SharedFSConfig
from headway.launch._network import HostAddressError, socket_ifname_environment
from workers import isolation
from workers.address import host_address
from workers.config import settings
from workers.distributed import NodePlan

STARTUP_HOOK = "startup-hook.sh"


def command(
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


def _storage_type(config: ExperimentConfig) -> str:
    """``checkpoint_storage.type`` (``shared_fs``, ``s3``), "" when the config names none."""
    storage = config.checkpoint_storage
    return storage.type if isinstance(storage, (SharedFSConfig, S3Config)) else ""


def environment(
    spec: wire.LaunchSpec,
    token: str,
    info_path: Path,
    node: NodePlan | None = None,
    user: isolation.TrialUser | None = None,
) -> dict[str, str]:
    """The trial process's environment on this host for its part of the run (``spec``: the
    chief's or a share's; ``token``: the run's; ``user``: the ``HEADWAY_TRIAL_USER`` it runs
    as)."""
    node = node or NodePlan(total_slots=max(spec.slots, 1))
    # An allow-list of the worker's environment: never its secrets (workers/isolation.py).
    config = spec.experiment_config
    env = isolation.trial_base_environment(
        os.environ, storage_type=_storage_type(config), extra=settings.HEADWAY_TRIAL_ENV
    )
    # The config's environment.environment_variables (by device type), before Headway's own.
    device: Literal["cpu", "cuda"] = "cuda" if spec.gpu else "cpu"
    env.update(config.environment.variables(device))
    # `python` in a shell entrypoint must be the interpreter that has headway installed.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(
        {
            "HEADWAY_MASTER": settings.HEADWAY_MASTER_URL,
            "HEADWAY_TOKEN": token,
            "HEADWAY_TRIAL_ID": str(spec.trial_id),
            "HEADWAY_RUN_ID": str(spec.run_id),
            "HEADWAY_EXPERIMENT_ID": str(spec.experiment_id),
            "HEADWAY_CLUSTER_INFO": str(info_path),
            "PYTHONUNBUFFERED": "1",
        }
    )
    threads = settings.HEADWAY_THREADS_PER_SLOT
    if threads:
        # One process with every slot of this host; the launcher gives each rank its own share.
        env["HEADWAY_THREADS_PER_SLOT"] = str(threads)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads * max(spec.slots, 1))
    devices = ",".join(str(device) for device in spec.devices)
    if devices:
        # The slots placement assigned on this host; on a GPU host they are CUDA device ids.
        env["HEADWAY_SLOT_IDS"] = devices
        if spec.gpu:
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
