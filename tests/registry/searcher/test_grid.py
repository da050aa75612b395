"""``grid``: its points (``headway.expconf.grid_points``: spacing of each axis, the cartesian
product, order), and the searcher driven with events: one trial per point, seeds, concurrency,
a JSON round trip of its state at every event, and trials without ``max_length``."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from headway.expconf import (
    ConfigError,
    ExperimentConfig,
    grid_point,
    grid_points,
    grid_size,
    parse_hyperparameters,
)
from tests.registry.searcher.helpers import (
    SIZE,
    SPACE,
    assert_round_trips_change_nothing,
    config,
    drive,
    end_every_trial_on_exit,
    objective,
    out_of_order,
    searcher_without_max_length,
)


def grid(hparam: dict[str, object]) -> list[object]:
    return [point["x"] for point in grid_points({"x": hparam})]


# --- grid points -------------------------------------------------------------------------------


def test_int_axes_are_evenly_spaced_rounded_half_away_from_zero_and_clamped() -> None:
    assert grid({"type": "int", "minval": 1, "maxval": 10, "count": 4}) == [1, 4, 7, 10]
    assert grid({"type": "int", "minval": 0, "maxval": 3, "count": 3}) == [0, 2, 3]  # 1.5 -> 2
    assert grid({"type": "int", "minval": -3, "maxval": 0, "count": 3}) == [-3, -2, 0]  # -1.5
    # More points than integers: every integer once.
    assert grid({"type": "int", "minval": 0, "maxval": 3, "count": 10}) == [0, 1, 2, 3]
    # One point: the (rounded) midpoint, as Determined.
    assert grid({"type": "int", "minval": 0, "maxval": 3, "count": 1}) == [2]
    values = grid({"type": "int", "minval": 0, "maxval": 100, "count": 7})
    assert all(isinstance(v, int) for v in values) and len(set(values)) == 7


def test_double_and_log_axes_include_both_ends() -> None:
    assert grid({"type": "double", "minval": 0.0, "maxval": 1.0, "count": 5}) == [
        0.0,
        0.25,
        0.5,
        0.75,
        1.0,
    ]
    assert grid({"type": "double", "minval": 0.1, "maxval": 0.7, "count": 7})[-1] == 0.7
    assert grid({"type": "double", "minval": -1.0, "maxval": 2.0, "count": 1}) == [0.5]
    assert grid({"type": "log", "minval": -4, "maxval": -1, "count": 4}) == pytest.approx(
        [1e-4, 1e-3, 1e-2, 1e-1]
    )
    assert grid({"type": "log", "base": 2, "minval": 3, "maxval": 5, "count": 3}) == [8, 16, 32]
    assert grid({"type": "log", "minval": -4, "maxval": -2, "count": 1}) == pytest.approx([1e-3])


def test_categorical_and_const_axes() -> None:
    assert grid({"type": "categorical", "vals": ["a", 1, [2]]}) == ["a", 1, [2]]
    assert grid({"type": "const", "val": {"warmup": 3}}) == [{"warmup": 3}]
    assert grid(7) == [7]  # type: ignore[arg-type]


def test_the_grid_is_exactly_the_cartesian_product() -> None:
    points = grid_points(SPACE)
    assert len(points) == grid_size(SPACE) == SIZE

    def flat(p: dict[str, object]) -> tuple[object, ...]:
        opt = p["optimizer"]
        assert isinstance(opt, dict) and set(opt) == {"momentum", "name"}
        assert set(p) == {"activation", "dropout", "global_batch_size", "hidden", "lr", "optimizer"}
        lr, momentum = p["lr"], opt["momentum"]
        assert isinstance(lr, float) and isinstance(momentum, float)
        return (p["activation"], p["dropout"], p["global_batch_size"], p["hidden"],
                round(lr, 12), round(momentum, 12), opt["name"])  # fmt: skip

    # Names are visited in sorted order (nested ones by path); the last axis varies fastest.
    expected = [
        (activation, dropout, 32, hidden, lr, momentum, "sgd")
        for activation, dropout, hidden, lr, momentum in itertools.product(
            ["relu", "tanh"], [0.0, 0.5], [16, 40, 64], [1e-4, 1e-3, 1e-2, 1e-1], [0.5, 0.7, 0.9]
        )
    ]
    assert [flat(p) for p in points] == expected


def test_grid_order_does_not_depend_on_key_order() -> None:
    # PostgreSQL's jsonb does not keep key order; a restarted server must see the same grid.
    reordered = dict(reversed(list(SPACE.items())))
    reordered["optimizer"] = dict(reversed(list(SPACE["optimizer"].items())))  # type: ignore[union-attr]
    assert grid_points(reordered) == grid_points(SPACE)


def test_grid_point_by_index_matches_the_full_grid() -> None:
    space = parse_hyperparameters(SPACE)
    points = grid_points(space)
    assert [grid_point(space, i) for i in range(SIZE)] == points
    with pytest.raises(IndexError):
        grid_point(space, SIZE)
    # Points are copies: mutating one changes nothing else.
    first = grid_point({"x": {"type": "categorical", "vals": [[1]]}}, 0)
    first["x"].append(2)
    assert grid_point({"x": {"type": "categorical", "vals": [[1]]}}, 0) == {"x": [1]}


def test_empty_spaces_and_groups_have_one_point() -> None:
    assert grid_points({}) == [{}]
    assert grid_points({"g": {}, "x": 1}) == [{"g": {}, "x": 1}]


def test_a_range_without_count_names_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        grid_points({"opt": {"lr": {"type": "log", "minval": -3, "maxval": -1}}})
    assert info.value.errors == {"hyperparameters.opt.lr.count": ["required by the grid searcher"]}


# --- driving the searcher ---------------------------------------------------------------------


def test_grid_creates_one_trial_per_point_and_finds_the_best() -> None:
    result = drive(config("grid", max_concurrent_trials=5))
    creates = result["creates"]
    assert isinstance(creates, list)
    assert [c.hparams for c in creates] == grid_points(SPACE)
    assert [c.request_id for c in creates] == [str(i) for i in range(1, SIZE + 1)]
    best = min(creates, key=lambda c: objective(c.hparams))
    assert best.hparams["hidden"] == 40 and best.hparams["lr"] == pytest.approx(1e-2)
    assert result["shutdowns"] == [f"closed {creates[-1].request_id}"]


def test_grid_trial_seeds_follow_the_experiment_seed() -> None:
    cfg = config("grid")
    first = drive(cfg, seed=1)["creates"]
    assert drive(cfg, seed=1)["creates"] == first
    second = drive(cfg, seed=2)["creates"]
    assert isinstance(first, list) and isinstance(second, list)
    assert [c.hparams for c in second] == [c.hparams for c in first]
    assert [c.seed for c in second] != [c.seed for c in first]


@pytest.mark.parametrize(("limit", "initial"), [(2, 2), (1, 1), (0, None), (500, None)])
def test_max_concurrent_trials_is_honoured(limit: int, initial: int | None) -> None:
    result = drive(config("grid", max_concurrent_trials=limit))
    log = result["log"]
    assert isinstance(log, list)
    first_event, first_ops = log[0]
    assert first_event == "initial"
    assert len(first_ops) == (SIZE if initial is None else initial)
    assert result["max_live"] == (SIZE if initial is None else initial)
    assert len(result["creates"]) == SIZE  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cfg",
    [
        config("grid", max_concurrent_trials=4),
        config("grid", max_concurrent_trials=0),
    ],
    ids=["grid-4", "grid-all"],
)
@pytest.mark.parametrize("pick", [lambda live: live[0], out_of_order], ids=["fifo", "lifo"])
def test_a_json_round_trip_at_every_event_changes_no_decision(
    cfg: ExperimentConfig, pick: Callable[[list[str]], str]
) -> None:
    assert_round_trips_change_nothing(cfg, pick)


def test_without_max_length_trials_get_no_operation_and_end_on_exit() -> None:
    method = searcher_without_max_length(name="grid", max_concurrent_trials=1)
    assert end_every_trial_on_exit(method) == (2, True)
