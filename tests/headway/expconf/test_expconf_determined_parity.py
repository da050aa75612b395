"""Determined 0.38 config forms: each field is honoured or refused
with a message naming it; Determined's own example configs parse unchanged."""

from __future__ import annotations

import pytest

from headway.expconf import ConfigError, EnvironmentConfig, parse_experiment_config

SCRIPT = {"entrypoint": "python3 train.py", "searcher": {"name": "single", "metric": "loss"}}


def _parse(**fields: object):
    return parse_experiment_config({**SCRIPT, **fields})


def _errors(**fields: object) -> dict[str, list[str]]:
    with pytest.raises(ConfigError) as info:
        _parse(**fields)
    return info.value.errors


# Determined 0.38's own example configs (examples/tutorials), as published.
MNIST_CONST = """
name: mnist_pytorch_const
hyperparameters:
  learning_rate: 1.0
  n_filters1: 32
  n_filters2: 64
  dropout1: 0.25
  dropout2: 0.5
searcher:
  name: single
  metric: validation_loss
  smaller_is_better: true
entrypoint: python3 train.py --epochs 1
"""
MNIST_ADAPTIVE = """
name: mnist_pytorch_adaptive_search
hyperparameters:
  learning_rate: {type: double, minval: .0001, maxval: 1.0}
  n_filters1: {type: int, minval: 8, maxval: 64}
searcher:
  name: adaptive_asha
  metric: validation_loss
  smaller_is_better: true
  max_trials: 16
  time_metric: batches
  max_time: 937  # 60,000 training images with batch size 64
entrypoint: python3 train.py --epochs 1
"""
CORE_API_STAGE_4 = """
name: core-api-stage-4
entrypoint: python3 4_distributed.py launcher
resources:
  slots_per_trial: 8
hyperparameters:
  increment_by: {type: int, minval: 1, maxval: 8}
searcher:
   name: single
   metric: x
max_restarts: 0
"""


@pytest.mark.parametrize("text", [MNIST_CONST, MNIST_ADAPTIVE, CORE_API_STAGE_4])
def test_determined_038_example_configs_parse_unchanged(text: str) -> None:
    parse_experiment_config(text)


@pytest.mark.parametrize(
    "searcher",
    [
        {"name": "single"},
        {"name": "random", "max_trials": 3},
        {"name": "grid"},
    ],
)
def test_max_length_is_optional_for_single_random_and_grid(searcher: dict) -> None:
    cfg = _parse(searcher={**searcher, "metric": "loss"})
    assert cfg.searcher.max_length is None
    # Stored as null: every reader treats a missing length as "the script decides".
    assert cfg.to_dict()["searcher"]["max_length"] is None


def test_adaptive_asha_takes_the_time_metric_form() -> None:
    cfg = parse_experiment_config(MNIST_ADAPTIVE)
    assert cfg.searcher.time_metric == "batches" and cfg.searcher.max_time == 937
    assert cfg.searcher.top_length == 937


@pytest.mark.parametrize(
    ("fields", "path", "text"),
    [
        ({}, "searcher.max_time", "needs either time_metric and max_time"),
        ({"time_metric": "batches"}, "searcher.max_time", "required with time_metric"),
        ({"max_time": 10}, "searcher.time_metric", "required with max_time"),
        (
            {"time_metric": "batches", "max_time": 10, "max_length": 10},
            "searcher.max_length",
            "not both",
        ),
    ],
)
def test_an_asha_search_needs_exactly_one_length_form(fields: dict, path: str, text: str) -> None:
    searcher = {"name": "adaptive_asha", "metric": "loss", "max_trials": 4, **fields}
    errors = _errors(searcher=searcher)
    assert list(errors) == [path] and text in errors[path][0]


def test_time_metric_is_refused_by_searchers_that_do_not_stop_trials() -> None:
    errors = _errors(searcher={"name": "random", "metric": "x", "max_trials": 2, "max_time": 5})
    assert "unknown field 'max_time'" in errors["searcher.max_time"][0]


def test_a_trial_class_entrypoint_needs_a_length_from_the_config() -> None:
    errors = _errors(entrypoint="model_def:Trial")
    assert "required with a module:Class entrypoint" in errors["searcher.max_length"][0]
    asha = {"name": "adaptive_asha", "metric": "x", "max_trials": 2}
    parse_experiment_config(
        {
            "entrypoint": "model_def:Trial",
            "searcher": {**asha, "time_metric": "epochs", "max_time": 2},
        }
    )


def test_data_is_stored_and_returned() -> None:
    data = {"url": "https://example.org/mnist.tgz", "nested": {"n": 1}}
    assert _parse(data=data).to_dict()["data"] == data
    assert _parse().to_dict()["data"] == {}


def test_environment_variables_in_both_forms() -> None:
    flat = _parse(environment={"environment_variables": ["A=1", "B=x=y", "A=2"]})
    assert flat.environment.variables("cpu") == {"A": "2", "B": "x=y"}
    assert flat.environment.variables("cuda") == {"A": "2", "B": "x=y"}
    by_device = _parse(
        environment={"environment_variables": {"cpu": ["D=cpu"], "cuda": ["D=gpu"]}}
    ).environment
    assert by_device.variables("cpu") == {"D": "cpu"}
    assert by_device.variables("cuda") == {"D": "gpu"}
    assert EnvironmentConfig().variables("cpu") == {}


@pytest.mark.parametrize(
    ("entry", "text"),
    [("NOEQUALS", "NAME=VALUE"), ("1X=2", "NAME=VALUE"), ("HEADWAY_TOKEN=x", "set by Headway")],
)
def test_bad_environment_variables_are_refused(entry: str, text: str) -> None:
    errors = _errors(environment={"environment_variables": [entry]})
    assert text in errors["environment.environment_variables"][0]


@pytest.mark.parametrize(
    "field", ["image", "pod_spec", "force_pull_image", "registry_auth", "add_capabilities"]
)
def test_container_fields_are_refused_saying_why(field: str) -> None:
    errors = _errors(environment={field: "x"})
    message = errors[f"environment.{field}"][0]
    assert "not supported" in message and "not in a container" in message
    assert "startup-hook.sh" in message


def test_bind_mounts_are_refused_saying_why() -> None:
    errors = _errors(bind_mounts=[{"host_path": "/tmp", "container_path": "/data"}])
    assert list(errors) == ["bind_mounts"] and "not in a container" in errors["bind_mounts"][0]


def test_log_policies_in_determined_s_forms() -> None:
    policies = [
        {"name": "oom", "pattern": "CUDA out of memory", "action": {"type": "cancel_retries"}},
        {"pattern": "Traceback", "action": "cancel_retries"},  # the legacy form
        {"name": "ECC Error"},  # disabling a default: Headway has none
    ]
    stored = _parse(log_policies=policies).to_dict()["log_policies"]
    assert [p["action"] for p in stored] == [
        {"type": "cancel_retries"},
        {"type": "cancel_retries"},
        None,
    ]


@pytest.mark.parametrize(
    ("policy", "path", "text"),
    [
        ({"name": "n", "pattern": "x", "action": "exclude_node"}, "action.type", "not supported"),
        ({"name": "n", "pattern": "(", "action": "cancel_retries"}, "pattern", "regular exp"),
        ({"name": "n", "pattern": "x"}, "action", "required with pattern"),
        ({"action": "cancel_retries"}, "name", "required"),
    ],
)
def test_bad_log_policies_are_refused(policy: dict, path: str, text: str) -> None:
    errors = _errors(log_policies=[policy])
    assert text in errors[f"log_policies[0].{path}"][0]


def test_profiling_enabled_is_kept_and_its_batch_window_refused() -> None:
    assert _parse(profiling={"enabled": True}).profiling.enabled
    errors = _errors(profiling={"enabled": True, "begin_on_batch": 2})
    assert "Determined 0.38 ignores it" in errors["profiling.begin_on_batch"][0]


def test_perform_initial_validation() -> None:
    assert _parse(perform_initial_validation=True).perform_initial_validation
    assert not _parse().perform_initial_validation


def test_a_list_entrypoint_is_an_argv() -> None:
    cfg = _parse(entrypoint=["python3", "train.py", "--name", "a b"])
    assert cfg.entrypoint_trial_class is None
    assert cfg.entrypoint_text == "python3 train.py --name 'a b'"
    errors = _errors(entrypoint=["python3", ""])
    assert "non-empty list of non-empty strings" in errors["entrypoint"][0]


@pytest.mark.parametrize(
    "zero", [{"batches": 0}, {"epochs": 0}, 0, {"unit": "batches", "value": 0}]
)
def test_a_zero_period_means_never(zero: object) -> None:
    cfg = _parse(min_validation_period=zero, min_checkpoint_period=zero)
    assert cfg.min_validation_period is None and cfg.min_checkpoint_period is None
    assert "min_validation_period" in _errors(min_validation_period={"batches": -1})


def test_max_slots_must_fit_one_trial() -> None:
    assert _parse(resources={"max_slots": 3}).resources.max_slots == 3
    errors = _errors(resources={"max_slots": 1, "slots_per_trial": 2})
    assert "at least slots_per_trial (2)" in errors["resources.max_slots"][0]
