"""Process set-up DeepSpeed needs before ``deepspeed.initialize``: accelerator, ranks, comm.

DeepSpeed picks its accelerator when first asked (``DS_ACCELERATOR`` wins); on a host without
CUDA Headway sets ``DS_ACCELERATOR=cpu`` so the choice is explicit. On the CPU accelerator
``deepspeed.initialize`` would JIT-compile a shared-memory all-reduce op with ninja + g++ the
first time (about 30 s, and a failure where no compiler is installed); Headway marks that op
incompatible so gloo's own collectives are used and nothing is compiled. Other ops an engine
needs (``FusedAdam`` for ``"optimizer": {"type": "Adam"}``, CPU Adam with offload, ...) are
compiled on first use, for minutes and silently: Headway logs a line before each build.

``deepspeed.init_distributed`` reads the torch launcher's variables (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) and otherwise tries MPI discovery (which needs
``mpi4py``); a single process started without a launcher gets them set here, with a free port.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger("headway.pytorch.deepspeed")

SHM_COMM_OP = "deepspeed_shm_comm"


def choose_accelerator() -> str | None:
    """Set ``DS_ACCELERATOR=cpu`` in this process's environment when it is unset and torch
    sees no CUDA device; return the value it now has (None: DeepSpeed will detect one)."""
    if not os.environ.get("DS_ACCELERATOR"):
        import torch

        if not torch.cuda.is_available():
            os.environ["DS_ACCELERATOR"] = "cpu"
    return os.environ.get("DS_ACCELERATOR") or None


def skip_op_builds() -> None:
    """On the CPU accelerator, mark DeepSpeed's shared-memory comm op as unavailable so
    ``deepspeed.initialize`` does not compile it (gloo collectives are used instead)."""
    import deepspeed.ops
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() == "cpu":
        deepspeed.ops.__compatible_ops__[SHM_COMM_OP] = False


def announce_op_builds() -> None:
    """Log a warning in the trial's log before DeepSpeed compiles one of its C++/CUDA ops.

    DeepSpeed builds an op it was not installed with (``DS_BUILD_OPS=0``, Headway's install)
    the first time an engine needs it, e.g. ``FusedAdam`` for ``"optimizer": {"type":
    "Adam"}``: ``OpBuilder.load()`` calls ``OpBuilder.jit_load()``, which runs ninja and prints
    nothing for minutes, so a trial looks hung. This wraps ``jit_load`` (once per process) to
    say so first, and how long it took after. Later runs reuse torch's extension cache and
    pass through quickly.
    """
    from deepspeed.ops.op_builder import builder

    original = builder.OpBuilder.jit_load
    if getattr(original, "_headway_announces", False):
        return

    @functools.wraps(original)
    def jit_load(self: Any, verbose: bool = True) -> Any:
        logger.warning(
            "DeepSpeed is building its %r op (%s) on first use: compiling can take several "
            "minutes without output; later runs reuse torch's extension cache",
            self.name,
            type(self).__name__,
        )
        start = time.monotonic()
        module = original(self, verbose)
        logger.info("DeepSpeed op %r ready after %.0f s", self.name, time.monotonic() - start)
        return module

    jit_load._headway_announces = True  # type: ignore[attr-defined]
    builder.OpBuilder.jit_load = jit_load


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def single_process_environment(environ: Any = None) -> dict[str, str]:
    """Fill in what a launcher would set for one process (rank 0 of 1 on this host, a free
    ``MASTER_PORT``), leaving any variable already set; return the variables it set.

    Does nothing when ``WORLD_SIZE`` is set (a launcher started this process).
    """
    env = os.environ if environ is None else environ
    if env.get("WORLD_SIZE"):
        return {}
    defaults = {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
    }
    added = {name: value for name, value in defaults.items() if not env.get(name)}
    if not env.get("MASTER_PORT"):
        added["MASTER_PORT"] = str(free_port())
    env.update(added)
    return added


@contextlib.contextmanager
def distributed_session() -> Iterator[None]:
    """Run the block with DeepSpeed's process group up; remove the variables it added after.

    Calls ``deepspeed.init_distributed`` without MPI discovery; it adopts a process group that
    ``torch.distributed`` already has (e.g. the one ``headway.exec.harness`` created). A group
    created here stays up for the rest of the process: DeepSpeed keeps module-level references
    to its groups and cannot build engines on a re-created one, so a later ``init()`` in the
    same process reuses it. The variables ``single_process_environment`` added are removed at
    the end, so they do not leak into code that runs afterwards.
    """
    import deepspeed

    added = single_process_environment()
    if added:
        logger.info("single process: set %s", ", ".join(f"{k}={v}" for k, v in added.items()))
    try:
        deepspeed.init_distributed(auto_mpi_discovery=False)
        yield
    finally:
        # Literal names: tests/docs/test_docs_env_vars.py checks every variable the code touches.
        for name in (
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "GROUP_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
        ):
            if name in added:
                os.environ.pop(name, None)
