"""Headway SDK: Core API, PyTorchTrial / Trainer, checkpoint storage and the ``headway`` CLI.

This package never imports Django; it runs on GPU hosts and laptops. ``headway.core`` and
``headway.pytorch`` load on first use, so ``import headway as det; det.core.init()`` works as in
Determined without importing torch for the CLI.
"""

import importlib
from typing import Any

from headway._import import import_from_path
from headway._info import ClusterInfo, TrialInfo, get_cluster_info
from headway.early_exit import EarlyExitReason, InvalidHP

__all__ = [
    "LOG_FORMAT",
    "ClusterInfo",
    "EarlyExitReason",
    "InvalidHP",
    "TrialInfo",
    "core",
    "experimental",
    "get_cluster_info",
    "import_from_path",
    "pytorch",
]
__version__ = "0.1.0"

# Determined's ``det.LOG_FORMAT``: the format its log viewer filters by level with; trials pass it
# to ``logging.basicConfig(format=headway.LOG_FORMAT)``.
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"

_LAZY_SUBMODULES = ("core", "experimental", "pytorch")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"headway.{name}")
    raise AttributeError(f"module 'headway' has no attribute {name!r}")
