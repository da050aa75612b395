"""RaySGD's ``TorchTrainer`` API on Headway: data-parallel training driven from one Python program.

A RaySGD program ports by changing its imports::

    from headway.torch_trainer import BATCH_SIZE, TorchTrainer, TrainingOperator
    # was: from ray.util.sgd import TorchTrainer
    #      from ray.util.sgd.torch import TrainingOperator
    #      from ray.util.sgd.utils import BATCH_SIZE

Workers are processes on this host started by ``torch.distributed.elastic`` (torchrun's engine)
and kept for the trainer's life. See docs/torch-trainer.md.
"""

from headway.torch_trainer._operator import TrainingOperator
from headway.torch_trainer._trainer import TorchTrainer
from headway.torch_trainer.utils import (
    BATCH_COUNT,
    BATCH_SIZE,
    NUM_SAMPLES,
    AverageMeter,
    AverageMeterCollection,
)

__all__ = [
    "BATCH_COUNT",
    "BATCH_SIZE",
    "NUM_SAMPLES",
    "AverageMeter",
    "AverageMeterCollection",
    "TorchTrainer",
    "TrainingOperator",
]
