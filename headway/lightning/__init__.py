"""``headway.lightning``: PyTorch Lightning reporting into Headway trials (docs/logging-from-anywhere.md).

``HeadwayLogger`` is a ``lightning.pytorch.loggers.Logger`` (metrics, hparams, checkpoint
files), ``DetLogger(core_context)`` the same bound to a context (Determined's shape);
``HeadwayCallback`` checkpoints and stops the ``Trainer`` when the trial is paused;
``latest_checkpoint_path`` resumes it. A script on the cluster needs three lines::

    with core.init() as core_context:
        trainer = L.Trainer(logger=HeadwayLogger(core_context),
                            callbacks=[HeadwayCallback(core_context)])
        trainer.fit(model, ckpt_path=latest_checkpoint_path(core_context))

Needs the ``lightning`` package (2.x), imported here only: ``import headway`` never imports it.
"""

from headway.lightning._callback import HeadwayCallback
from headway.lightning._checkpoints import latest_checkpoint_path
from headway.lightning._logger import DetLogger, HeadwayLogger
from headway.lightning._names import metric_group

__all__ = [
    "DetLogger",
    "HeadwayCallback",
    "HeadwayLogger",
    "latest_checkpoint_path",
    "metric_group",
]
