"""``headway.expconf``'s continue-trial override parsers: ``NAME=VALUE`` hyperparameters and
``max_length`` (used by ``headway trial continue`` and the dashboard's "Continue trial" form)."""

from __future__ import annotations

import pytest

from headway.expconf import (
    OverrideError,
    merge_hparam_overrides,
    parse_hparam_overrides,
    parse_max_length,
)


def test_hparam_overrides_are_yaml_scalars_nested_by_dottednames_in() -> None:
    overrides = parse_hparam_overrides(
        ["lr=0.01", "wd=1e-4", "layers=3", "opt.name=adam", "opt.beta= 0.9", " ", "x=", "on=true"]
    )
    assert overrides == {
        "lr": 0.01,
        "wd": 1e-4,
        "layers": 3,
        "opt": {"name": "adam", "beta": 0.9},
        "x": None,
        "on": True,
    }
    current = {"lr": 0.1, "opt": {"name": "sgd", "momentum": 0.9, "beta": 0.5}}
    merged = merge_hparam_overrides(current, {"opt": {"beta": 0.9}})
    assert merged == {"opt": {"name": "sgd", "momentum": 0.9, "beta": 0.9}}
    assert current["opt"]["beta"] == 0.5  # not modified


@pytest.mark.parametrize("item", ["lr", "=1", "a..b=1", "lr=[1"])
def test_bad_hparam_overrides_name_the_item(item: str) -> None:
    with pytest.raises(OverrideError, match="hyperparameter"):
        parse_hparam_overrides([item])


def test_max_length_override_forms() -> None:
    assert parse_max_length("20") == 20
    assert parse_max_length("epochs=2") == {"epochs": 2}
    assert parse_max_length(" Records = 5 ") == {"records": 5}
    for bad in ("0", "-1", "x", "weeks=2", "epochs=", "batches=1.5"):
        with pytest.raises(OverrideError, match="max_length"):
            parse_max_length(bad)
