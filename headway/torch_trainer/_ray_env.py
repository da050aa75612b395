"""Whether a Ray cluster is reachable, asked without importing Ray where none can be."""

from __future__ import annotations

import importlib.util
import os
import sys


def ray_reachable() -> bool:
    """Whether the trainer's workers run on a Ray cluster: this process already called
    ``ray.init()``, or ``RAY_ADDRESS`` names a cluster.

    Ray is imported only then: it is an optional dependency and slow to import.

    Raises:
        RuntimeError: ``RAY_ADDRESS`` is set but Ray is not installed.
    """
    if "ray" not in sys.modules and not os.environ.get("RAY_ADDRESS"):
        return False
    if importlib.util.find_spec("ray") is None:
        raise RuntimeError(
            "RAY_ADDRESS is set but Ray is not installed (pip install 'headway[ray]'); "
            "unset it to run the workers on this host"
        )
    from headway.torch_trainer._ray_group import reachable

    return reachable()


def cluster_gpus() -> float:
    """The GPUs the Ray cluster lists in all (``use_gpu="auto"`` on Ray)."""
    from headway.torch_trainer import _ray_group

    return _ray_group.cluster_gpus()
