"""``python -m headway.launch.torch_distributed [TORCH_OVERRIDES... --] (--trial M:C | CMD...)``.

Starts one process per slot of this host with PyTorch's own launcher, ``torch.distributed.run``
(``torchrun``), which sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` in each. Same command line as Determined's
``determined.launch.torch_distributed``, so an entrypoint ports by changing ``determined`` to
``headway``::

    entrypoint: python -m headway.launch.torch_distributed python train.py --epochs 5

The worker tells this launcher what the run holds on this host through its environment:

- ``HEADWAY_SLOT_IDS``: this host's slots of the run (one process each; 1 when unset).
- ``HEADWAY_NUM_NODES`` / ``HEADWAY_NODE_RANK``: how many hosts the run spans and which one this
  is (1 / 0 when unset). One host: ``torchrun --standalone`` (c10d rendezvous on a free local
  port). Several: static rendezvous with ``--nnodes``, ``--node-rank``, ``--master-addr
  $HEADWAY_CHIEF_IP --master-port $HEADWAY_RDZV_PORT``: the TCP store lives on the chief host
  (node 0), which holds global rank 0.
- ``HEADWAY_HOST_ADDRESS``: this host's advertised address, torchrun's ``--local-addr`` over
  several hosts; one host uses ``127.0.0.1``. Either way torchrun never falls back to the host
  name, which Debian resolves to ``127.0.1.1`` (or which may not resolve at all).
- ``HEADWAY_THREADS_PER_SLOT``: ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` of each rank.

``--max-restarts 0``: a rank that fails stops every rank of this host (torchrun terminates
them) and the launcher exits non-zero; the registry then restarts the whole group from the
latest checkpoint while ``max_restarts`` allows. Each rank runs under
``headway.launch.wrap_rank RANK --``, as in Determined's launcher: its output lines carry
``[rank=N] || `` and come out whole (not torchrun's ``--tee``, which can cut a line a rank writes
in two calls). ``TORCH_OVERRIDES`` (ending in ``--``) are appended to the
torchrun arguments, so they win over the ones derived here (torchrun's parser keeps the last
value), e.g. ``--nproc-per-node 2 --`` to try the launcher outside a cluster.

On a GPU host the ranks use NCCL and ``cuda:LOCAL_RANK`` (``headway.exec.harness``); elsewhere
gloo on the CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

_USAGE = "%(prog)s [TORCH_OVERRIDES... --] (--trial MODULE:CLASS | CMD...)"


class LaunchError(Exception):
    """A bad launcher command line or environment, reported as one line."""


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """How many processes to start on this host and how they meet the other hosts' ones.

    Attributes:
        nproc_per_node (int): processes (slots) on this host, >= 1.
        nnodes (int): hosts the run spans, >= 1.
        node_rank (int): this host's index, ``0 <= node_rank < nnodes``; 0 is the chief.
        chief_addr (str): address of the chief host (where the rendezvous store listens).
        port (int | None): rendezvous port on the chief host; None with one host (torchrun
            picks a free one).
        threads_per_slot (int | None): ``OMP_NUM_THREADS`` for each rank; None leaves it.
        local_addr (str): this host's address as the other hosts reach it (torchrun's
            ``--local-addr``: ``MASTER_ADDR`` of the ranks when this host is the chief).
    """

    nproc_per_node: int
    nnodes: int = 1
    node_rank: int = 0
    chief_addr: str = "127.0.0.1"
    port: int | None = None
    threads_per_slot: int | None = None
    local_addr: str = "127.0.0.1"


def _int_env(name: str, raw: str | None, default: int | None, minimum: int) -> int:
    if raw is None or raw == "":
        if default is None:
            raise LaunchError(f"${name} is not set")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise LaunchError(f"${name}={raw!r} is not an integer") from None
    if value < minimum:
        raise LaunchError(f"${name}={value} must be >= {minimum}")
    return value


def plan_from_env(environ: Mapping[str, str] | None = None) -> LaunchPlan:
    """Read the ``LaunchPlan`` from the variables the worker sets (see the module docstring).

    Raises:
        LaunchError: naming the variable that is malformed, or ``HEADWAY_RDZV_PORT`` missing
            for a run over several hosts.
    """
    env = os.environ if environ is None else environ
    slot_ids = [s for s in (env.get("HEADWAY_SLOT_IDS") or "").split(",") if s.strip()]
    nnodes = _int_env("HEADWAY_NUM_NODES", env.get("HEADWAY_NUM_NODES"), 1, 1)
    node_rank = _int_env("HEADWAY_NODE_RANK", env.get("HEADWAY_NODE_RANK"), 0, 0)
    if node_rank >= nnodes:
        raise LaunchError(f"$HEADWAY_NODE_RANK={node_rank} must be < $HEADWAY_NUM_NODES={nnodes}")
    port = None
    if nnodes > 1:
        port = _int_env("HEADWAY_RDZV_PORT", env.get("HEADWAY_RDZV_PORT"), None, 1)
    threads = _int_env("HEADWAY_THREADS_PER_SLOT", env.get("HEADWAY_THREADS_PER_SLOT"), 0, 0)
    return LaunchPlan(
        nproc_per_node=max(len(slot_ids), 1),
        nnodes=nnodes,
        node_rank=node_rank,
        chief_addr=env.get("HEADWAY_CHIEF_IP") or "127.0.0.1",
        port=port,
        threads_per_slot=threads or None,
        local_addr=(env.get("HEADWAY_HOST_ADDRESS") if nnodes > 1 else None) or "127.0.0.1",
    )


def torchrun_command(
    plan: LaunchPlan,
    script: Sequence[str],
    overrides: Sequence[str] = (),
    log_dir: str | None = None,
) -> list[str]:
    """The ``python -m torch.distributed.run ...`` command line that runs ``script`` per slot.

    ``script[0]`` is run as an executable (``--no-python``), so ``python train.py`` and
    ``./run.sh`` both work; a bare ``python`` / ``python3`` is this interpreter (the one with
    ``headway`` installed). Each rank is ``python -m headway.launch.wrap_rank RANK -- script``
    (module docstring). ``log_dir`` is where torchrun keeps each rank's error file (default: a
    temporary directory of its own).
    """
    script = list(script)
    if script and script[0] in ("python", "python3"):
        script[0] = sys.executable
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(plan.nproc_per_node),
        "--max-restarts",
        "0",
    ]
    # Not the host name's resolution (torchrun's default): see the module docstring.
    cmd += ["--local-addr", plan.local_addr]
    if plan.nnodes == 1:
        cmd.append("--standalone")
    else:
        cmd += [
            "--nnodes",
            str(plan.nnodes),
            "--node-rank",
            str(plan.node_rank),
            "--master-addr",
            plan.chief_addr,
            "--master-port",
            str(plan.port),
        ]
    if log_dir is not None:
        cmd += ["--log-dir", log_dir]
    cmd += list(overrides)
    cmd += ["--no-python", sys.executable, "-m", "headway.launch.wrap_rank", "RANK", "--", *script]
    return cmd


def child_environment(plan: LaunchPlan, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment torchrun (and so every rank) gets: this one plus ``HEADWAY_CHIEF_IP``
    and per-rank thread counts."""
    env = dict(os.environ if environ is None else environ)
    env["HEADWAY_CHIEF_IP"] = plan.chief_addr
    env.setdefault("PYTHONUNBUFFERED", "1")
    if plan.threads_per_slot:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(plan.threads_per_slot)
    return env


def parse_args(
    argv: Sequence[str], prog: str = "python -m headway.launch.torch_distributed"
) -> tuple[list[str], list[str]]:
    """Split the command line into ``(torch_overrides, script)``; ``prog`` names it in usage.

    ``--trial MODULE:CLASS`` becomes ``python -m headway.exec.harness MODULE:CLASS``.

    Raises:
        LaunchError: for ``--trial`` with a script, or neither.
    """
    args = list(argv)
    overrides: list[str] = []
    if "--" in args:
        split = args.index("--")
        overrides, args = args[:split], args[split + 1 :]
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=_USAGE,
        description="Start one process per slot with torchrun (torch.distributed.run).",
    )
    parser.add_argument(
        "--trial", help="a PyTorchTrial or DeepSpeedTrial entrypoint, package.module:TrialClass"
    )
    parser.add_argument("script", metavar="CMD...", nargs=argparse.REMAINDER)
    parsed = parser.parse_args(args)
    script = list(parsed.script)
    if parsed.trial is not None:
        if script:
            raise LaunchError(f"extra arguments after --trial {parsed.trial}: {' '.join(script)}")
        return overrides, [sys.executable, "-m", "headway.exec.harness", parsed.trial]
    if not script:
        raise LaunchError("no command to launch; give --trial MODULE:CLASS or CMD...")
    return overrides, script


def _log_dir() -> str | None:
    # On the cluster: next to the cluster info, in the run's directory (kept when the run
    # fails, removed with it otherwise). Locally: torchrun's own temporary directory.
    info = os.environ.get("HEADWAY_CLUSTER_INFO")
    return str(Path(info).parent / "rank-logs") if info else None


def exec_torchrun(
    argv: Sequence[str] | None,
    *,
    prog: str,
    environment: Callable[[LaunchPlan], dict[str, str]],
) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and replace this process with torchrun, whose
    ranks get ``environment(plan)``; returns only on a usage error (status 2, one line naming
    ``prog`` on stderr). Replacing the process lets signals sent to it reach torchrun directly.
    """
    try:
        overrides, script = parse_args(sys.argv[1:] if argv is None else argv, prog=prog)
        plan = plan_from_env()
    except LaunchError as exc:
        print(f"{prog.split()[-1]}: error: {exc}", file=sys.stderr)
        return 2
    cmd = torchrun_command(plan, script, overrides, _log_dir())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, cmd, environment(plan))
    return 0  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m headway.launch.torch_distributed``: ``exec_torchrun`` with the ranks'
    ``child_environment``."""
    return exec_torchrun(
        argv, prog="python -m headway.launch.torch_distributed", environment=child_environment
    )


if __name__ == "__main__":
    sys.exit(main())
