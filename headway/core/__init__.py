"""Headway Core API: plug metrics, checkpoints, preemption and searcher into any training loop.

Same public names and semantics as Determined's ``determined.core`` (see docs/core-api.md)::

    from headway import core

    with core.init() as core_context:
        core_context.train.report_training_metrics(steps_completed=100, metrics={"loss": 0.3})
"""

from headway.core._checkpoint import CheckpointContext, DownloadMode
from headway.core._context import Context
from headway.core._disk_full import CheckpointStorageFull
from headway.core._distributed import DistributedContext
from headway.core._init import init
from headway.core._preempt import PreemptContext, PreemptMode
from headway.core._searcher import SearcherContext, SearcherMode, SearcherOperation
from headway.core._tensorboard import TensorboardMode
from headway.core._train import TrainContext
from headway.early_exit import EarlyExitReason, InvalidHP
from headway.expconf import Unit

__all__ = [
    "CheckpointContext",
    "CheckpointStorageFull",
    "Context",
    "DistributedContext",
    "DownloadMode",
    "EarlyExitReason",
    "InvalidHP",
    "PreemptContext",
    "PreemptMode",
    "SearcherContext",
    "SearcherMode",
    "SearcherOperation",
    "TensorboardMode",
    "TrainContext",
    "Unit",
    "init",
]
