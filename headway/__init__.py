"""Headway SDK: Core API, PyTorchTrial / Trainer, checkpoint storage and the ``headway`` CLI.

This package never imports Django; it runs on GPU hosts and laptops. ``headway.core`` and
``headway.pytorch`` load on first use, so ``import headway as det; det.core.init()`` works as in
Determined without importing torch for the CLI.
"""

import importlib
from typing import Any

from headway._info import ClusterInfo, TrialInfo, get_cluster_info
from headway.early_exit import EarlyExitReason, InvalidHP

__all__ = [
    "ClusterInfo",
    "EarlyExitReason",
    "InvalidHP",
    "TrialInfo",
    "core",
    "get_cluster_info",
    "pytorch",
]
__version__ = "0.1.0"

_LAZY_SUBMODULES = ("core", "pytorch")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"headway.{name}")
    raise AttributeError(f"module 'headway' has no attribute {name!r}")
