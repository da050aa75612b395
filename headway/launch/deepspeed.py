"""``python -m headway.launch.deepspeed [TORCH_OVERRIDES... --] (--trial M:C | CMD...)``.

Starts one process per slot, like ``headway.launch.torch_distributed`` (whose command line,
environment contract and torchrun invocation it reuses), for DeepSpeed training: DeepSpeed's
``init_distributed`` reads the ``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR`` /
``MASTER_PORT`` that torchrun sets, so no ``deepspeed`` / pdsh launcher or hostfile is needed.
The counterpart of Determined's ``determined.launch.deepspeed``::

    entrypoint: python -m headway.launch.deepspeed --trial model_def:MyDeepSpeedTrial
    entrypoint: python -m headway.launch.deepspeed python train.py

What it adds to the ranks' environment: ``DS_ACCELERATOR=cpu`` when it is unset and this host
has no CUDA device, so DeepSpeed uses its CPU accelerator (gloo collectives) instead of
guessing, also in scripts that import ``deepspeed`` directly. (Scripts that do not use
``headway.pytorch.deepspeed`` should also set ``deepspeed.ops.__compatible_ops__
["deepspeed_shm_comm"] = False`` on the CPU, or DeepSpeed compiles that op with g++ on first
use; docs/deepspeed.md.)

``--trial`` runs ``headway.exec.harness`` in each rank, which trains a ``DeepSpeedTrial`` (or a
``PyTorchTrial``). Multi-slot cluster trials already run through
``headway.launch.torch_distributed --trial``, which works for a ``DeepSpeedTrial`` as well.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from headway.launch import torch_distributed as td


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def deepspeed_environment(
    plan: td.LaunchPlan, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``torch_distributed.child_environment`` plus what DeepSpeed needs (module docstring)."""
    env = td.child_environment(plan, environ)
    if not env.get("DS_ACCELERATOR") and not _has_cuda():
        env["DS_ACCELERATOR"] = "cpu"
    return env


def main(argv: Sequence[str] | None = None) -> int:
    """Replace this process with torchrun; returns only on a usage error (status 2)."""
    return td.exec_torchrun(
        argv, prog="python -m headway.launch.deepspeed", environment=deepspeed_environment
    )


if __name__ == "__main__":
    sys.exit(main())
