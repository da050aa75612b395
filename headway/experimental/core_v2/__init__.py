"""``headway.experimental.core_v2``: Determined 0.38's ``core_v2`` (unmanaged runs).

Report metrics and checkpoints from a plain ``python train.py`` anywhere (a laptop, a notebook,
another scheduler): ``init()`` creates or finds the experiment and trial in the registry at
``$HEADWAY_MASTER`` with the user's token, and the script uses the singletons below, which are
``headway.core``'s contexts (docs/logging-from-anywhere.md)::

    from headway.experimental import core_v2

    core_v2.init(config=core_v2.Config(name="my-run", external_experiment_id="exp-1",
                                       external_trial_id="trial-1"))
    core_v2.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
    core_v2.close()

Inside a managed trial ``init()`` sets the trial's own contexts and ignores the config.
"""

from __future__ import annotations

from headway._info import ClusterInfo
from headway.core import (
    CheckpointContext,
    DistributedContext,
    PreemptContext,
    PreemptMode,
    SearcherContext,
    TensorboardMode,
    TrainContext,
)
from headway.experimental.core_v2._config import Config, DefaultConfig, UnmanagedConfig
from headway.experimental.core_v2._core_v2 import (
    close,
    init,
    init_context,
    url_reverse_webui_exp_view,
)

__all__ = [
    "Config",
    "DefaultConfig",
    "DistributedContext",
    "PreemptMode",
    "TensorboardMode",
    "UnmanagedConfig",
    "checkpoint",
    "close",
    "distributed",
    "info",
    "init",
    "init_context",
    "preempt",
    "searcher",
    "train",
    "url_reverse_webui_exp_view",
]

# The singletons init() sets and close() clears (Determined's names).
train: TrainContext | None = None
checkpoint: CheckpointContext | None = None
preempt: PreemptContext | None = None
distributed: DistributedContext | None = None
searcher: SearcherContext | None = None
info: ClusterInfo | None = None
