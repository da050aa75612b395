"""``ModelParallelUnit``: which ranks build data loaders and report metrics.

Same fields as Determined's ``determined.pytorch.deepspeed.ModelParallelUnit``. Data-parallel
training uses every rank (``make_data_parallel_mpu``); a DeepSpeed pipeline engine's grid gives
the data-parallel rank and size and lets only the first and last pipeline stages load data
(``make_deepspeed_mpu``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from headway.core import DistributedContext


@dataclasses.dataclass
class ModelParallelUnit:
    """The data-parallel topology the harness shards data and reports metrics by.

    Subclass it (or build one) for custom model parallelism and pass it to
    ``DeepSpeedTrialContext.set_mpu``.

    Attributes:
        data_parallel_rank (int): this rank's index among the data-parallel replicas; the
            training and validation loaders are sharded by it.
        data_parallel_world_size (int): number of data-parallel replicas.
        should_report_metrics (bool): whether this rank's ``train_batch`` / ``evaluate_batch``
            metrics count (usually the ranks of the last pipeline stage).
        should_build_data_loader (bool): whether this rank builds data loaders (usually the
            first and last pipeline stages); others get ``None`` as their data iterator.
    """

    data_parallel_rank: int
    data_parallel_world_size: int
    should_report_metrics: bool
    should_build_data_loader: bool


def make_data_parallel_mpu(dist_context: DistributedContext) -> ModelParallelUnit:
    """Every rank is a data-parallel replica that loads data and reports metrics."""
    return ModelParallelUnit(
        data_parallel_rank=dist_context.rank,
        data_parallel_world_size=dist_context.size,
        should_report_metrics=True,
        should_build_data_loader=True,
    )


def make_deepspeed_mpu(grid: Any) -> ModelParallelUnit:
    """The unit of a DeepSpeed ``PipelineParallelGrid`` (``PipelineEngine.grid``).

    Data loaders are built on the first and last pipeline stages (the first feeds inputs, the
    last computes the loss from labels) of slice-parallel rank 0, as Determined does.
    """
    stage = grid.get_pipe_parallel_rank()
    last = grid.get_pipe_parallel_world_size() - 1
    return ModelParallelUnit(
        data_parallel_rank=grid.get_data_parallel_rank(),
        data_parallel_world_size=grid.get_data_parallel_world_size(),
        should_report_metrics=True,
        should_build_data_loader=grid.get_slice_parallel_rank() == 0 and stage in (0, last),
    )
