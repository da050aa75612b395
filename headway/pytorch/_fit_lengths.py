"""How long ``Trainer.fit()`` trains: from its ``max_length`` argument, the experiment config's
``searcher.max_length`` or a time-metric ASHA's ``max_time`` (Determined 0.38's rules)."""

from __future__ import annotations

import logging
from typing import Any

from headway.pytorch._trainer_config import TrainerConfig
from headway.pytorch._units import Batch, Epoch, TrainUnit, unit_from_config

logger = logging.getLogger("headway.pytorch")


def cluster_max_length(
    conf: TrainerConfig, max_length: TrainUnit | None, test_mode: bool
) -> TrainUnit | None:
    """What ``fit()`` trains on the cluster: None when the searcher's operations decide (the
    config has ``searcher.max_length``), else ``max_length`` or the time-metric length."""
    if test_mode:
        raise ValueError("fit(test_mode=True) is only supported in local training mode")
    if conf.max_length is not None:
        if max_length is not None:
            logger.warning(
                "fit(max_length=%r) ignored: the searcher decides on the cluster",
                max_length,
            )
        return None  # the searcher's operations decide
    # Determined 0.38: no searcher.max_length, the script decides how long.
    max_length = max_length or _time_metric_length(conf)
    if max_length is None:
        raise ValueError(
            "fit(max_length=...) is required: the experiment config has no "
            "searcher.max_length (nor adaptive_asha time_metric batches/epochs)"
        )
    return max_length


def local_max_length(conf: TrainerConfig, gbs: Any, test_mode: bool) -> TrainUnit | None:
    """What ``fit()`` trains locally when it was given no ``max_length``: the config's
    ``searcher.max_length`` (None only in test mode, which trains one batch)."""
    max_length = unit_from_config(conf.max_length, "searcher.max_length", gbs)
    if max_length is None and not test_mode:
        raise ValueError(
            "fit(max_length=...) is required when training locally "
            "(or pass exp_conf with searcher.max_length to pytorch.init)"
        )
    return max_length


def _time_metric_length(conf: TrainerConfig) -> TrainUnit | None:
    """``max_time`` of a time-metric ASHA counted in ``batches`` or ``epochs``, as a TrainUnit
    (Determined's ``fit()`` expects its ``max_length`` to match it); None otherwise."""
    unit = {"batches": Batch, "epochs": Epoch}.get(conf.time_metric or "")
    if unit is None or conf.max_time is None:
        return None
    return unit(conf.max_time)
