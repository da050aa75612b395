"""Experiment config schema (pydantic) and hyperparameter sampling, Determined-compatible.

.. code::

    from headway.expconf import parse_experiment_config, sample_hparams
    cfg = parse_experiment_config(open("exp.yaml").read())
    hparams = sample_hparams(cfg.hyperparameters, random.Random(cfg.reproducibility.experiment_seed))
"""

from headway.expconf._environment import EnvironmentConfig
from headway.expconf._errors import ConfigError
from headway.expconf._experiment import (
    RESOURCE_POOL_NAME,
    ExperimentConfig,
    ReproducibilityConfig,
    ResourcesConfig,
    check_resource_pool_name,
    parse_experiment_config,
)
from headway.expconf._hparams import (
    CategoricalHyperparameter,
    ConstHyperparameter,
    DoubleHyperparameter,
    Hyperparameter,
    IntHyperparameter,
    LogHyperparameter,
    flatten_hparams,
    grid_point,
    grid_points,
    grid_size,
    parse_hyperparameters,
    sample_hparams,
)
from headway.expconf._length import UNITS, Length, Unit, length_to_batches
from headway.expconf._local import (
    LocalExperimentConfig,
    constant_hparams,
    parse_local_config,
)
from headway.expconf._overrides import (
    OverrideError,
    merge_hparam_overrides,
    parse_hparam_overrides,
    parse_max_length,
)
from headway.expconf._received import (
    checkpoint_storage_json,
    config_json,
    parse_received_config,
)
from headway.expconf._searchers import (
    SEARCHER_CONFIGS,
    AdaptiveASHASearcherConfig,
    AsyncHalvingSearcherConfig,
    GridSearcherConfig,
    LocalSearcherConfig,
    RandomSearcherConfig,
    SearcherConfig,
    SingleSearcherConfig,
)
from headway.expconf._sections import ProfilingConfig
from headway.expconf._storage import (
    CheckpointStorageConfig,
    LocationStorageConfig,
    S3Config,
    SharedFSConfig,
    check_sub_path,
)
from headway.expconf._system_metrics import SystemMetricsConfig
from headway.expconf._yaml import MAX_CONFIG_DEPTH, MAX_YAML_VALUES, load_yaml

__all__ = [
    "MAX_CONFIG_DEPTH",
    "MAX_YAML_VALUES",
    "RESOURCE_POOL_NAME",
    "SEARCHER_CONFIGS",
    "UNITS",
    "AdaptiveASHASearcherConfig",
    "AsyncHalvingSearcherConfig",
    "CategoricalHyperparameter",
    "CheckpointStorageConfig",
    "ConfigError",
    "ConstHyperparameter",
    "DoubleHyperparameter",
    "EnvironmentConfig",
    "ExperimentConfig",
    "GridSearcherConfig",
    "Hyperparameter",
    "IntHyperparameter",
    "Length",
    "LocalExperimentConfig",
    "LocalSearcherConfig",
    "LocationStorageConfig",
    "LogHyperparameter",
    "OverrideError",
    "ProfilingConfig",
    "RandomSearcherConfig",
    "ReproducibilityConfig",
    "ResourcesConfig",
    "S3Config",
    "SearcherConfig",
    "SharedFSConfig",
    "SingleSearcherConfig",
    "SystemMetricsConfig",
    "Unit",
    "check_resource_pool_name",
    "check_sub_path",
    "checkpoint_storage_json",
    "config_json",
    "constant_hparams",
    "flatten_hparams",
    "grid_point",
    "grid_points",
    "grid_size",
    "length_to_batches",
    "load_yaml",
    "merge_hparam_overrides",
    "parse_experiment_config",
    "parse_hparam_overrides",
    "parse_hyperparameters",
    "parse_local_config",
    "parse_max_length",
    "parse_received_config",
    "sample_hparams",
]
