"""Local mode's config (``parse_local_config``): any subset of an experiment config, validated
by the cluster's models, with ``entrypoint`` and the searcher's ``name`` optional."""

from __future__ import annotations

from typing import Any

import pytest

from headway.expconf import (
    ConfigError,
    Length,
    LocalSearcherConfig,
    SingleSearcherConfig,
    constant_hparams,
    parse_local_config,
)
from headway.pytorch._trainer_config import TrainerConfig


def test_a_few_fields_parse_with_the_rest_at_their_defaults() -> None:
    config = parse_local_config({"searcher": {"metric": "validation_loss"}, "scheduling_unit": 4})
    assert isinstance(config.searcher, LocalSearcherConfig)
    assert config.searcher.metric == "validation_loss"
    assert config.scheduling_unit == 4
    assert config.optimizations.aggregation_frequency == 1
    assert parse_local_config(None).searcher.metric is None


def test_a_whole_config_is_validated_as_on_the_cluster() -> None:
    config = parse_local_config(
        {
            "entrypoint": "model_def:Trial",  # no max_length: locally fit() is given one
            "searcher": {"name": "single", "metric": "acc", "smaller_is_better": False},
            "hyperparameters": {"lr": 0.1, "group": {"width": 8}},
            "min_validation_period": {"epochs": 1},
        }
    )
    assert isinstance(config.searcher, SingleSearcherConfig)
    assert config.min_validation_period == Length.parse({"epochs": 1}, "x")
    assert constant_hparams(config) == {"group": {"width": 8}, "lr": 0.1}


@pytest.mark.parametrize(
    ("exp_conf", "field"),
    [
        ({"searcher": {"metric": "x", "max_trials": 3}}, "searcher.max_trials"),
        ({"searcher": {"name": "nope", "metric": "x"}}, "searcher.name"),
        ({"searcher": {"time_metric": "batches"}}, "searcher.max_time"),
        ({"min_checkpoint_period": "soon"}, "min_checkpoint_period"),
        ({"reproducibility": {"experiment_seed": -1}}, "reproducibility.experiment_seed"),
        ({"optimizations": {"aggregation_frequency": 0}}, "optimizations.aggregation_frequency"),
        ({"scheduling_unt": 4}, "scheduling_unt"),
        ({"entrypoint": ""}, "entrypoint"),
    ],
)
def test_a_bad_field_is_named(exp_conf: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_local_config(exp_conf)
    assert field in caught.value.errors


def test_a_search_space_is_not_a_local_value() -> None:
    config = parse_local_config({"hyperparameters": {"opt": {"lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10}}}})  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        constant_hparams(config)
    assert list(caught.value.errors) == ["hyperparameters.opt.lr"]
    assert "search space (log)" in str(caught.value)


def test_the_trainer_reads_a_local_config_typed() -> None:
    conf = TrainerConfig.from_local(
        {
            "searcher": {"metric": "loss", "max_length": {"batches": 50}},
            "records_per_epoch": 640,
            "reproducibility": {"experiment_seed": 9},
            "profiling": {"enabled": True},
            "data": {"path": "/d"},
        }
    )
    assert conf.searcher_metric == "loss"
    assert conf.max_length == Length.parse({"batches": 50}, "x")
    assert (conf.records_per_epoch, conf.experiment_seed) == (640, 9)
    assert conf.profiling_enabled and conf.data == {"path": "/d"}
    assert TrainerConfig.from_local({}).searcher_metric is None
