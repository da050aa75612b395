"""Headway's DeepSpeed API: write a ``DeepSpeedTrial``, run it with ``Trainer`` or on the cluster.

Public names match Determined's ``determined.pytorch.deepspeed``, so porting a trial means
changing ``from determined.pytorch import deepspeed as det_ds`` to
``from headway.pytorch import deepspeed as det_ds`` (and ``det.pytorch.DataLoader`` to
``headway.pytorch.DataLoader``)::

    from headway import pytorch
    from headway.pytorch import deepspeed as hw_ds

    with hw_ds.init(hparams={"lr": 0.01}) as context:
        trial = MyDeepSpeedTrial(context)
        hw_ds.Trainer(trial, context).fit(max_length=pytorch.Epoch(3))

Importing this package sets ``DS_ACCELERATOR=cpu`` when it is unset and torch sees no CUDA
device, keeps DeepSpeed from compiling ops on the CPU, and logs a line before DeepSpeed
compiles an op it needs (e.g. ``FusedAdam``'s, minutes without output) (``_setup``). Needs the optional
dependency ``deepspeed`` (``pip install 'headway[deepspeed]'``). See docs/deepspeed.md.
"""

from headway.pytorch.deepspeed import _setup

_setup.choose_accelerator()  # before DeepSpeed picks one, i.e. before importing it

try:
    import deepspeed  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "headway.pytorch.deepspeed needs DeepSpeed: pip install 'headway[deepspeed]' "
        "(DS_BUILD_OPS=0 installs it without compiling ops)"
    ) from exc

_setup.skip_op_builds()
_setup.announce_op_builds()

from headway.pytorch.deepspeed._config import overwrite_deepspeed_config  # noqa: E402
from headway.pytorch.deepspeed._context import DeepSpeedTrialContext  # noqa: E402
from headway.pytorch.deepspeed._mpu import (  # noqa: E402
    ModelParallelUnit,
    make_data_parallel_mpu,
    make_deepspeed_mpu,
)
from headway.pytorch.deepspeed._trainer import Trainer, init  # noqa: E402
from headway.pytorch.deepspeed._trial import DeepSpeedTrial  # noqa: E402

__all__ = [
    "DeepSpeedTrial",
    "DeepSpeedTrialContext",
    "ModelParallelUnit",
    "Trainer",
    "init",
    "make_data_parallel_mpu",
    "make_deepspeed_mpu",
    "overwrite_deepspeed_config",
]
