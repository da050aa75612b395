"""Headway's PyTorch API: write a ``PyTorchTrial``, run it with ``Trainer`` or on the cluster.

Public names match Determined's ``determined.pytorch``, so porting a trial means changing
``from determined.pytorch import ...`` to ``from headway.pytorch import ...``::

    from headway import pytorch

    with pytorch.init(hparams={"global_batch_size": 32, "lr": 0.1}) as context:
        trial = MyTrial(context)
        pytorch.Trainer(trial, context).fit(max_length=pytorch.Epoch(3))

See docs/pytorch-trial.md.
"""

from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._checkpointing import STATE_FILE
from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch._dataloader import DataLoader
from headway.pytorch._load import CheckpointLoadContext, load_trial_from_checkpoint_path
from headway.pytorch._lr_scheduler import LRScheduler
from headway.pytorch._metrics import MetricReducer, Reducer
from headway.pytorch._trainer import Trainer, init
from headway.pytorch._trial import PyTorchTrial, TorchData
from headway.pytorch._units import Batch, Epoch, TrainUnit

__all__ = [
    "STATE_FILE",
    "Batch",
    "CheckpointLoadContext",
    "DataLoader",
    "Epoch",
    "LRScheduler",
    "MetricReducer",
    "PyTorchCallback",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Reducer",
    "TorchData",
    "TrainUnit",
    "Trainer",
    "init",
    "load_trial_from_checkpoint_path",
]
