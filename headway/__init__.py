"""Headway SDK: Core API, PyTorchTrial / Trainer, checkpoint storage and the ``headway`` CLI.

This package never imports Django; it runs on GPU hosts and laptops.
"""

from headway._info import ClusterInfo, TrialInfo, get_cluster_info

__all__ = ["ClusterInfo", "TrialInfo", "get_cluster_info"]
__version__ = "0.1.0"
