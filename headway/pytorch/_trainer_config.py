"""``TrainerConfig``: the experiment config's fields a PyTorch (or DeepSpeed) trial's context and
``Trainer`` read, typed.

On the cluster they come from the ``ExperimentConfig`` in the trial's cluster info (validated
once when the process read it: ``headway.get_cluster_info()``). Locally they come from the
``exp_conf`` mapping given to ``init()`` (Determined's local mode: often a few fields, no
``entrypoint`` nor searcher ``name``), validated by the same models
(``headway.expconf.parse_local_config``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from headway.expconf import ExperimentConfig, Length, parse_local_config


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """What the trainer takes from the experiment config.

    Attributes:
        searcher_metric (str | None): ``searcher.metric`` (None locally without one: no
            "best" checkpoint); ``smaller_is_better`` its direction (default True).
        max_length (Length | None): ``searcher.max_length``.
        time_metric (str | None), max_time (int | None): an ASHA searcher's
            ``time_metric`` / ``max_time`` (Determined 0.38's form).
        min_validation_period, min_checkpoint_period (Length | None): the config's periods.
        scheduling_unit (int): batches between training reports on the cluster (default 100).
        records_per_epoch (int | None): the epoch length for loaders without ``len()``.
        aggregation_frequency (int), average_aggregated_gradients (bool): ``optimizations``.
        experiment_seed (int | None): ``reproducibility.experiment_seed``.
        perform_initial_validation (bool), profiling_enabled (bool): the harness's ``fit()``
            arguments (``profiling.enabled``).
        data (dict): the ``data`` section.
    """

    searcher_metric: str | None = None
    smaller_is_better: bool = True
    max_length: Length | None = None
    time_metric: str | None = None
    max_time: int | None = None
    min_validation_period: Length | None = None
    min_checkpoint_period: Length | None = None
    scheduling_unit: int = 100
    records_per_epoch: int | None = None
    aggregation_frequency: int = 1
    average_aggregated_gradients: bool = True
    experiment_seed: int | None = None
    perform_initial_validation: bool = False
    profiling_enabled: bool = False
    data: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_config(cls, config: ExperimentConfig) -> TrainerConfig:
        """The fields of a validated config (the cluster's), read as attributes."""
        searcher = config.searcher
        return cls(
            searcher_metric=searcher.metric,
            smaller_is_better=searcher.smaller_is_better,
            max_length=searcher.max_length,
            # Only the halving searchers have these (Determined 0.38's timed ASHA).
            time_metric=getattr(searcher, "time_metric", None),
            max_time=getattr(searcher, "max_time", None),
            min_validation_period=config.min_validation_period,
            min_checkpoint_period=config.min_checkpoint_period,
            scheduling_unit=config.scheduling_unit,
            records_per_epoch=config.records_per_epoch,
            aggregation_frequency=config.optimizations.aggregation_frequency,
            average_aggregated_gradients=config.optimizations.average_aggregated_gradients,
            experiment_seed=config.reproducibility.experiment_seed,
            perform_initial_validation=config.perform_initial_validation,
            profiling_enabled=config.profiling.enabled,
            data=dict(config.data),
        )

    @classmethod
    def from_local(cls, exp_conf: Mapping[str, Any] | None) -> TrainerConfig:
        """The fields of a local ``exp_conf`` mapping (``headway.expconf.parse_local_config``:
        any subset of an experiment config); absent ones at their defaults.

        Raises:
            ConfigError: a field that does not validate (naming it).
        """
        return cls.from_config(parse_local_config(exp_conf))
