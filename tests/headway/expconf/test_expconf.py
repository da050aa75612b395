"""Unit tests of ``headway.expconf``: parsing, normalisation, error paths and sampling."""

from __future__ import annotations

import math
import random

import pytest

from headway.expconf import (
    ConfigError,
    ExperimentConfig,
    GridSearcherConfig,
    Length,
    LogHyperparameter,
    RandomSearcherConfig,
    length_to_batches,
    parse_experiment_config,
    parse_hyperparameters,
    sample_hparams,
)
from tests.helpers import REPO

FULL_YAML = """
name: digits-mlp
description: MLP on sklearn digits
labels: [demo, digits]
entrypoint: model_def:DigitsTrial
hyperparameters:
  global_batch_size: 32
  lr: {type: log, base: 10, minval: -4, maxval: -1}
  weight_decay: 1e-4
  hidden: {type: int, minval: 16, maxval: 128}
  dropout: {type: double, minval: 0.0, maxval: 0.5}
  activation: {type: categorical, vals: [relu, tanh]}
  optimizer:
    name: sgd
    momentum: {type: double, minval: 0.5, maxval: 0.99}
    schedule: {type: const, val: {warmup: 10}}
searcher:
  name: single
  metric: validation_accuracy
  smaller_is_better: false
  max_length: {epochs: 3}
resources: {slots_per_trial: 1}
max_restarts: 2
checkpoint_storage:
  type: shared_fs
  host_path: /tmp/headway-ckpt
min_validation_period: {batches: 50}
min_checkpoint_period: 200
records_per_epoch: 1437
scheduling_unit: 50
reproducibility: {experiment_seed: 42}
"""

MINIMAL = {
    "entrypoint": "python train.py --epochs 3",
    "searcher": {"name": "single", "metric": "val_loss", "max_length": 10},
}


def _errors(data: object) -> dict[str, list[str]]:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(data)  # type: ignore[arg-type]
    assert str(info.value).startswith("invalid experiment config:")
    return info.value.errors


def test_it_parses_a_full_config_and_round_trips() -> None:
    cfg = parse_experiment_config(FULL_YAML)
    assert cfg.name == "digits-mlp"
    assert cfg.entrypoint_trial_class == ("model_def", "DigitsTrial")
    assert cfg.searcher.max_length == Length(unit="epochs", value=3)
    assert cfg.min_checkpoint_period == Length(unit="batches", value=200)
    assert cfg.checkpoint_storage is not None
    assert cfg.checkpoint_storage.host_path == "/tmp/headway-ckpt"
    # YAML 1.1 would read 1e-4 as a string; the loader reads it as a float.
    assert cfg.hyperparameters["weight_decay"].val == pytest.approx(1e-4)
    assert isinstance(cfg.hyperparameters["lr"], LogHyperparameter)

    data = cfg.to_dict()
    assert data["searcher"]["max_length"] == {"epochs": 3}
    assert data["min_checkpoint_period"] == {"batches": 200}
    assert data["hyperparameters"]["global_batch_size"] == {"type": "const", "val": 32}
    assert data["hyperparameters"]["optimizer"]["schedule"] == {
        "type": "const",
        "val": {"warmup": 10},
    }
    assert parse_experiment_config(data) == cfg
    assert parse_experiment_config(data).to_dict() == data


def test_it_fills_defaults_for_a_minimal_config() -> None:
    cfg = parse_experiment_config(MINIMAL)
    assert cfg.name == "experiment"
    assert cfg.entrypoint_trial_class is None
    assert cfg.max_restarts == 5
    assert cfg.scheduling_unit == 100
    assert cfg.resources.slots_per_trial == 1
    assert cfg.checkpoint_storage is None
    assert cfg.reproducibility.experiment_seed is None
    assert cfg.searcher.smaller_is_better is True
    # A bare integer max_length means batches.
    assert cfg.searcher.max_length == Length(unit="batches", value=10)
    assert isinstance(cfg, ExperimentConfig)


def test_it_reports_malformed_yaml_with_line_and_column() -> None:
    errors = _errors("entrypoint: x\nsearcher: [unclosed\n")
    assert list(errors) == ["config"]
    assert "line 3" in errors["config"][0] and "column" in errors["config"][0]


@pytest.mark.parametrize("document", ["- a\n- b\n", "", "just text"])
def test_it_rejects_a_top_level_that_is_not_a_mapping(document: str) -> None:
    errors = _errors(document)
    assert "must be a mapping" in errors["config"][0]


def test_it_names_an_unknown_top_level_field_and_lists_allowed_ones() -> None:
    errors = _errors({**MINIMAL, "bogus_field": 1})
    (message,) = errors["bogus_field"]
    assert "bogus_field" in message
    assert "entrypoint" in message and "hyperparameters" in message and "searcher" in message


def test_it_names_unknown_nested_fields_with_their_allowed_names() -> None:
    errors = _errors(
        {
            **MINIMAL,
            "resources": {"slots": 2},
            "searcher": {**MINIMAL["searcher"], "max_trials": 3},
            "hyperparameters": {"g": {"x": {"type": "int", "minval": 1, "maxval": 2, "c": 3}}},
        }
    )
    assert (
        "allowed fields: max_slots, priority, resource_pool, slots_per_trial"
        in errors["resources.slots"][0]
    )
    assert "max_length" in errors["searcher.max_trials"][0]
    assert "minval" in errors["hyperparameters.g.x.c"][0]


def test_it_reports_every_error_at_once() -> None:
    errors = _errors(
        {
            "searcher": {"name": "single", "max_length": 0},
            "max_restarts": -1,
            "labels": ["ok", 3],
        }
    )
    assert set(errors) >= {
        "entrypoint",
        "searcher.metric",
        "searcher.max_length",
        "max_restarts",
        "labels[1]",
    }


def test_it_lists_allowed_values_for_a_bad_searcher_name() -> None:
    errors = _errors({**MINIMAL, "searcher": {**MINIMAL["searcher"], "name": "bayesian"}})
    assert errors["searcher.name"] == [
        "invalid value 'bayesian'; allowed: single, random, grid, async_halving, adaptive_asha"
    ]


def test_it_lists_allowed_storage_types() -> None:
    errors = _errors({**MINIMAL, "checkpoint_storage": {"type": "gcs"}})
    assert "allowed: shared_fs" in errors["checkpoint_storage.type"][0]


@pytest.mark.parametrize(
    ("hparam", "path", "needle"),
    [
        ({"type": "int", "minval": 0.5, "maxval": 3}, "hyperparameters.x.minval", "integer"),
        ({"type": "int", "minval": 1, "maxval": "9"}, "hyperparameters.x.maxval", "integer"),
        ({"type": "double", "minval": 1.0, "maxval": 0.1}, "hyperparameters.x.maxval", "minval"),
        ({"type": "log", "minval": -1, "maxval": -1}, "hyperparameters.x.maxval", "minval"),
        ({"type": "double", "minval": "a", "maxval": 1}, "hyperparameters.x.minval", "number"),
        ({"type": "categorical", "vals": []}, "hyperparameters.x.vals", "at least 1"),
        ({"type": "uniform", "minval": 0}, "hyperparameters.x.type", "allowed: const, int"),
        ({"type": "const"}, "hyperparameters.x.val", "required"),
    ],
)
def test_it_names_the_field_of_a_wrong_hyperparameter(
    hparam: dict[str, object], path: str, needle: str
) -> None:
    errors = _errors({**MINIMAL, "hyperparameters": {"x": hparam}})
    assert needle in " ".join(errors[path])


@pytest.mark.parametrize(
    ("max_length", "expected"),
    [
        (7, Length(unit="batches", value=7)),
        ({"batches": 7}, Length(unit="batches", value=7)),
        ({"epochs": 2}, Length(unit="epochs", value=2)),
        ({"records": 640}, Length(unit="records", value=640)),
    ],
)
def test_it_normalises_max_length(max_length: object, expected: Length) -> None:
    cfg = parse_experiment_config(
        {**MINIMAL, "searcher": {**MINIMAL["searcher"], "max_length": max_length}}
    )
    assert cfg.searcher.max_length == expected


@pytest.mark.parametrize(
    "max_length", [0, -3, True, 2.5, {"steps": 3}, {"batches": 1, "epochs": 1}]
)
def test_it_rejects_bad_lengths(max_length: object) -> None:
    errors = _errors({**MINIMAL, "searcher": {**MINIMAL["searcher"], "max_length": max_length}})
    assert "searcher.max_length" in errors


def test_it_rejects_a_file_path_as_trial_class() -> None:
    errors = _errors({**MINIMAL, "entrypoint": "model_def.py:MyTrial"})
    assert "model_def:MyTrial" in errors["entrypoint"][0]


def test_length_to_batches_converts_each_unit() -> None:
    kwargs = {"records_per_epoch": 1000, "global_batch_size": 32}
    assert length_to_batches(Length(unit="batches", value=5), **kwargs) == 5
    assert length_to_batches(Length(unit="records", value=64), **kwargs) == 2
    assert length_to_batches(Length(unit="records", value=65), **kwargs) == 3
    assert length_to_batches(Length(unit="epochs", value=2), **kwargs) == math.ceil(2000 / 32)


def test_length_to_batches_names_what_is_missing() -> None:
    with pytest.raises(ConfigError) as info:
        length_to_batches(
            Length(unit="epochs", value=1), records_per_epoch=None, global_batch_size=8
        )
    assert list(info.value.errors) == ["records_per_epoch"]
    with pytest.raises(ConfigError) as info:
        length_to_batches(
            Length(unit="records", value=9), records_per_epoch=None, global_batch_size=None
        )
    assert list(info.value.errors) == ["hyperparameters.global_batch_size"]


def test_nested_sampling_is_deterministic_and_within_bounds() -> None:
    space = parse_experiment_config(FULL_YAML).hyperparameters
    first = sample_hparams(space, random.Random(7))
    assert first == sample_hparams(space, random.Random(7))
    assert first["global_batch_size"] == 32
    assert first["optimizer"]["name"] == "sgd"
    assert first["optimizer"]["schedule"] == {"warmup": 10}
    for seed in range(200):
        sample = sample_hparams(space, random.Random(seed))
        assert 16 <= sample["hidden"] <= 128 and isinstance(sample["hidden"], int)
        assert 0.0 <= sample["dropout"] <= 0.5
        assert sample["activation"] in ("relu", "tanh")
        assert 0.5 <= sample["optimizer"]["momentum"] <= 0.99


def test_log_sampling_covers_its_range() -> None:
    space = parse_hyperparameters({"lr": {"type": "log", "minval": -4, "maxval": -1}})
    rng = random.Random(0)
    values = [sample_hparams(space, rng)["lr"] for _ in range(2000)]
    assert all(1e-4 <= v <= 1e-1 for v in values)
    # Uniform in the exponent: about a third of samples in each decade.
    below_1e3 = sum(v < 1e-3 for v in values) / len(values)
    assert 0.25 < below_1e3 < 0.42
    base2 = parse_hyperparameters({"x": {"type": "log", "base": 2, "minval": 3, "maxval": 5}})
    assert all(8 <= sample_hparams(base2, rng)["x"] <= 32 for _ in range(100))


def test_sample_hparams_accepts_a_raw_space_and_copies_constants() -> None:
    raw = {"layers": [64, 32], "opt": {"lr": 0.1}}
    sample = sample_hparams(raw, random.Random(0))
    assert sample == {"layers": [64, 32], "opt": {"lr": 0.1}}
    sample["layers"].append(1)
    assert sample_hparams(raw, random.Random(0))["layers"] == [64, 32]


@pytest.mark.parametrize(
    ("section", "path", "hint"),
    [
        ({"bind_mounts": []}, "bind_mounts", "not in a container"),
        (
            {"log_policies": [{"name": "ecc", "pattern": "ECC", "action": "exclude_node"}]},
            "log_policies[0].action.type",
            "drain the host",
        ),
        ({"environment": {"image": "x"}}, "environment.image", "container image"),
    ],
)
def test_fields_not_implemented_yet_are_refused_by_name(
    section: dict[str, object], path: str, hint: str
) -> None:
    """Nothing is accepted and silently ignored: each error names the field and says why."""
    errors = _errors({**MINIMAL, **section})
    assert list(errors) == [path]
    assert "not supported" in errors[path][0] and hint in errors[path][0]


def _searcher(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "metric": "loss", "max_length": 10, **fields}


def test_random_and_grid_searchers_parse_with_determined_defaults() -> None:
    cfg = parse_experiment_config({**MINIMAL, "searcher": _searcher("random", max_trials=5)})
    assert isinstance(cfg.searcher, RandomSearcherConfig)
    assert cfg.searcher.max_trials == 5 and cfg.searcher.max_concurrent_trials == 16
    assert parse_experiment_config(cfg.to_dict()) == cfg
    cfg = parse_experiment_config(
        {**MINIMAL, "searcher": _searcher("grid", max_concurrent_trials=0)}
    )
    assert isinstance(cfg.searcher, GridSearcherConfig)
    assert cfg.searcher.max_concurrent_trials == 0


@pytest.mark.parametrize(
    ("searcher", "path", "message"),
    [
        (_searcher("random"), "searcher.max_trials", "field required"),
        (_searcher("random", max_trials=0), "searcher.max_trials", "must be > 0, got 0"),
        (
            _searcher("random", max_trials=2, max_concurrent_trials=-1),
            "searcher.max_concurrent_trials",
            "must be >= 0, got -1",
        ),
        (_searcher("grid", max_trials=2), "searcher.max_trials", "unknown field 'max_trials'"),
        (
            _searcher("single", max_concurrent_trials=2),
            "searcher.max_concurrent_trials",
            "unknown field 'max_concurrent_trials'",
        ),
    ],
)
def test_searcher_fields_are_checked_by_name(
    searcher: dict[str, object], path: str, message: str
) -> None:
    errors = _errors({**MINIMAL, "searcher": searcher})
    assert list(errors) == [path]
    assert errors[path][0].startswith(message)


_LR = {"type": "log", "minval": -3, "maxval": -1}


def test_grid_requires_count_on_every_range_hyperparameter() -> None:
    space = {
        "units": {"type": "int", "minval": 1, "maxval": 4, "count": 4},
        "opt": {"lr": _LR, "name": "sgd"},
        "act": {"type": "categorical", "vals": ["relu"]},
    }
    errors = _errors({**MINIMAL, "hyperparameters": space, "searcher": _searcher("grid")})
    assert errors == {"hyperparameters.opt.lr.count": ["required by the grid searcher"]}
    space["opt"] = {"lr": {**_LR, "count": 3}, "name": "sgd"}
    cfg = parse_experiment_config(
        {**MINIMAL, "hyperparameters": space, "searcher": _searcher("grid")}
    )
    assert cfg.hyperparameters["opt"]["lr"].count == 3


@pytest.mark.parametrize(
    "searcher", [_searcher("single"), _searcher("random", max_trials=2)], ids=["single", "random"]
)
def test_count_is_accepted_and_ignored_by_the_other_searchers(searcher: dict[str, object]) -> None:
    # Determined ignores count outside grid search; a grid config ports to random unchanged.
    space = {"g": {"d": {"type": "double", "minval": 0.0, "maxval": 1.0, "count": 2}}}
    cfg = parse_experiment_config({**MINIMAL, "hyperparameters": space, "searcher": searcher})
    assert cfg.to_dict()["hyperparameters"]["g"]["d"]["count"] == 2


def test_count_must_be_positive() -> None:
    space = {"lr": {**_LR, "count": 0}}
    errors = _errors({**MINIMAL, "hyperparameters": space, "searcher": _searcher("grid")})
    assert errors == {"hyperparameters.lr.count": ["must be >= 1, got 0"]}


def test_sampling_does_not_depend_on_key_order() -> None:
    # A database may hand the config back with its keys reordered (PostgreSQL jsonb does).
    space = {"b": {"type": "int", "minval": 0, "maxval": 9}, "a": {"y": 0.5, "x": _LR}}
    reordered = {"a": {"x": _LR, "y": 0.5}, "b": space["b"]}
    assert sample_hparams(space, random.Random(3)) == sample_hparams(reordered, random.Random(3))


@pytest.mark.parametrize("name", ["const.yaml", "random.yaml", "grid.yaml", "adaptive.yaml"])
def test_the_shipped_example_configs_parse(name: str) -> None:
    path = REPO / "examples" / "digits" / name
    cfg = parse_experiment_config(path.read_text())
    assert cfg.entrypoint_trial_class == ("model_def", "DigitsTrial")


def test_several_slots_per_trial_are_accepted_for_a_shell_command_entrypoint() -> None:
    # A Core API script receives every assigned device and may start its own ranks.
    cfg = parse_experiment_config({**MINIMAL, "resources": {"slots_per_trial": 4}})
    assert cfg.resources.slots_per_trial == 4
    assert cfg.to_dict()["resources"] == {
        "slots_per_trial": 4,
        "priority": 42,
        "max_slots": None,
        "resource_pool": "default",
    }


@pytest.mark.parametrize(("priority", "ok"), [(1, True), (99, True), (0, False), (100, False)])
def test_priority_is_determined_s_1_to_99(priority: int, ok: bool) -> None:
    config = {**MINIMAL, "resources": {"priority": priority}}
    if ok:
        assert parse_experiment_config(config).resources.priority == priority
    else:
        assert list(_errors(config)) == ["resources.priority"]
