"""Searchers (pure Python, no database): grid points, random sampling, and driving the random
and grid searchers with events, with and without a JSON round trip of their state."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable

import pytest

from headway.expconf import (
    ConfigError,
    ExperimentConfig,
    grid_point,
    grid_points,
    grid_size,
    parse_experiment_config,
    parse_hyperparameters,
)
from registry.searcher import SEARCHERS, Create, Operation, SearchMethod, Shutdown, build_searcher

SPACE = {
    "global_batch_size": 32,
    "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1, "count": 4},
    "hidden": {"type": "int", "minval": 16, "maxval": 64, "count": 3},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5, "count": 2},
    "activation": {"type": "categorical", "vals": ["relu", "tanh"]},
    "optimizer": {
        "name": "sgd",
        "momentum": {"type": "double", "minval": 0.5, "maxval": 0.9, "count": 3},
    },
}
SIZE = 4 * 3 * 2 * 2 * 3


def grid(hparam: dict[str, object]) -> list[object]:
    return [point["x"] for point in grid_points({"x": hparam})]


def config(
    name: str, space: dict[str, object] | None = None, **searcher: object
) -> ExperimentConfig:
    space = SPACE if space is None else space
    if name != "grid":
        space = _without_counts(space)
    return parse_experiment_config(
        {
            "entrypoint": "python train.py",
            "hyperparameters": space,
            "searcher": {"name": name, "metric": "loss", "max_length": 10, **searcher},
        }
    )


def _without_counts(space: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, value in space.items():
        if isinstance(value, dict) and "type" not in value:
            out[name] = _without_counts(value)
        elif isinstance(value, dict):
            out[name] = {k: v for k, v in value.items() if k != "count"}
        else:
            out[name] = value
    return out


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


# --- driving searchers with events -------------------------------------------------------------


def objective(hparams: dict[str, object]) -> float:
    """A synthetic validation loss, smallest near lr=1e-2, hidden=40."""
    lr, hidden = hparams["lr"], hparams["hidden"]
    assert isinstance(lr, float) and isinstance(hidden, int)
    return (math.log10(lr) + 2) ** 2 + ((hidden - 40) / 24) ** 2


def json_round_trip(searcher: SearchMethod, cfg: ExperimentConfig, seed: int) -> SearchMethod:
    """A searcher rebuilt from JSON, as the registry does at every event."""
    rebuilt = build_searcher(cfg, seed)
    rebuilt.load_state_dict(json.loads(json.dumps(searcher.state_dict())))
    assert rebuilt.state_dict() == searcher.state_dict()
    return rebuilt


def drive(
    cfg: ExperimentConfig,
    seed: int = 7,
    *,
    round_trip: bool = False,
    exits_early: Callable[[str], bool] = lambda request_id: False,
    pick: Callable[[list[str]], str] = lambda live: live[0],
) -> dict[str, object]:
    """Run a search to its end: every live trial reports ``objective`` and then closes (or exits
    early), one at a time, in the order ``pick`` chooses. Returns what happened."""
    searcher = build_searcher(cfg, seed)
    log: list[tuple[str, list[Operation]]] = []
    live: list[str] = []
    creates: list[Create] = []
    max_live = 0
    progress: list[float | None] = []

    def handle(event: str, operations: list[Operation]) -> None:
        nonlocal searcher, max_live
        log.append((event, operations))
        for op in operations:
            if isinstance(op, Create):
                creates.append(op)
                live.append(op.request_id)
                handle(f"created {op.request_id}", searcher.on_trial_created(op.request_id))
        max_live = max(max_live, len(live))
        progress.append(searcher.progress())
        if round_trip:
            searcher = json_round_trip(searcher, cfg, seed)

    handle("initial", searcher.initial_operations())
    while live:
        request_id = pick(live)
        hparams = next(c.hparams for c in creates if c.request_id == request_id)
        if exits_early(request_id):
            live.remove(request_id)
            handle(f"exited {request_id}", searcher.on_trial_exited_early(request_id, "errored"))
            continue
        metric = objective(hparams) if "lr" in hparams else 0.0
        handle(f"validated {request_id}", searcher.on_validation_completed(request_id, metric, 10))
        live.remove(request_id)
        handle(f"closed {request_id}", searcher.on_trial_closed(request_id))
    shutdowns = [event for event, ops in log if any(isinstance(op, Shutdown) for op in ops)]
    return {
        "log": log,
        "creates": creates,
        "max_live": max_live,
        "shutdowns": shutdowns,
        "progress": progress,
        "searcher": searcher,
    }


def test_both_searchers_are_registered() -> None:
    assert {"single", "random", "grid"} <= set(SEARCHERS)
    assert type(build_searcher(config("random", max_trials=2), 0)).__name__ == "RandomSearch"
    assert type(build_searcher(config("grid"), 0)).__name__ == "GridSearch"


def test_grid_creates_one_trial_per_point_and_finds_the_best() -> None:
    result = drive(config("grid", max_concurrent_trials=5))
    creates = result["creates"]
    assert isinstance(creates, list)
    assert [c.hparams for c in creates] == grid_points(SPACE)
    assert [c.request_id for c in creates] == [str(i) for i in range(1, SIZE + 1)]
    best = min(creates, key=lambda c: objective(c.hparams))
    assert best.hparams["hidden"] == 40 and best.hparams["lr"] == pytest.approx(1e-2)
    assert result["shutdowns"] == [f"closed {creates[-1].request_id}"]


def test_random_respects_types_bounds_and_the_seed() -> None:
    cfg = config("random", max_trials=200, max_concurrent_trials=0)
    creates = drive(cfg, seed=3)["creates"]
    assert isinstance(creates, list) and len(creates) == 200
    for create in creates:
        hp = create.hparams
        assert hp["global_batch_size"] == 32 and hp["optimizer"]["name"] == "sgd"
        assert isinstance(hp["hidden"], int) and 16 <= hp["hidden"] <= 64
        assert isinstance(hp["dropout"], float) and 0.0 <= hp["dropout"] <= 0.5
        assert 1e-4 <= hp["lr"] <= 1e-1
        assert 0.5 <= hp["optimizer"]["momentum"] <= 0.9
        assert hp["activation"] in ("relu", "tanh")
        assert isinstance(create.seed, int) and 0 <= create.seed < 2**31
    assert {c.hparams["activation"] for c in creates} == {"relu", "tanh"}
    assert len({c.hparams["dropout"] for c in creates}) == 200
    assert len({c.seed for c in creates}) == 200
    assert drive(cfg, seed=3)["creates"] == creates
    other = drive(cfg, seed=4)["creates"]
    assert isinstance(other, list)
    assert [c.hparams for c in other] != [c.hparams for c in creates]
    assert [c.seed for c in other] != [c.seed for c in creates]


def test_grid_trial_seeds_follow_the_experiment_seed() -> None:
    cfg = config("grid")
    first = drive(cfg, seed=1)["creates"]
    assert drive(cfg, seed=1)["creates"] == first
    second = drive(cfg, seed=2)["creates"]
    assert isinstance(first, list) and isinstance(second, list)
    assert [c.hparams for c in second] == [c.hparams for c in first]
    assert [c.seed for c in second] != [c.seed for c in first]


@pytest.mark.parametrize(
    ("name", "extra", "total"),
    [("random", {"max_trials": 7}, 7), ("grid", {}, SIZE)],
)
@pytest.mark.parametrize(("limit", "initial"), [(2, 2), (1, 1), (0, None), (500, None)])
def test_max_concurrent_trials_is_honoured(
    name: str, extra: dict[str, object], total: int, limit: int, initial: int | None
) -> None:
    result = drive(config(name, max_concurrent_trials=limit, **extra))
    log = result["log"]
    assert isinstance(log, list)
    first_event, first_ops = log[0]
    assert first_event == "initial"
    assert len(first_ops) == (total if initial is None else initial)
    assert result["max_live"] == (total if initial is None else initial)
    assert len(result["creates"]) == total  # type: ignore[arg-type]


def test_the_default_max_concurrent_trials_is_16() -> None:
    cfg = config("random", max_trials=40)
    assert cfg.searcher.max_concurrent_trials == 16  # type: ignore[union-attr]
    assert drive(cfg)["max_live"] == 16


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_max_trials_is_reached_exactly_even_when_trials_exit_early(limit: int) -> None:
    cfg = config("random", max_trials=10, max_concurrent_trials=limit)
    result = drive(cfg, exits_early=lambda request_id: int(request_id) % 3 == 0)
    creates = result["creates"]
    assert isinstance(creates, list)
    assert [c.request_id for c in creates] == [str(i) for i in range(1, 11)]
    assert result["shutdowns"] == ["closed 10"]
    searcher = result["searcher"]
    assert isinstance(searcher, SearchMethod)
    assert searcher.progress() == 1.0
    # Events after the end, or about trials that do not exist, change nothing.
    assert searcher.on_trial_closed("4") == []
    assert searcher.on_trial_exited_early("11", "errored") == []
    assert searcher.on_trial_closed("x") == []


def test_progress_is_ended_trials_over_all_trials() -> None:
    result = drive(config("random", max_trials=4, max_concurrent_trials=2))
    # After "initial", each trial is created, validated and closed in turn.
    progress = [p for p in result["progress"] if p is not None]  # type: ignore[union-attr]
    assert progress[0] == 0.0 and progress[-1] == 1.0
    assert sorted(progress) == progress
    assert set(progress) == {0.0, 0.25, 0.5, 0.75, 1.0}


def _out_of_order(live: list[str]) -> str:
    # End the newest trial when there are several: a different order than creation.
    return live[-1] if len(live) > 1 else live[0]


@pytest.mark.parametrize(
    "cfg",
    [
        config("random", max_trials=9, max_concurrent_trials=2),
        config("random", max_trials=5, max_concurrent_trials=0),
        config("grid", max_concurrent_trials=4),
        config("grid", max_concurrent_trials=0),
    ],
    ids=["random-2", "random-all", "grid-4", "grid-all"],
)
@pytest.mark.parametrize("pick", [lambda live: live[0], _out_of_order], ids=["fifo", "lifo"])
def test_a_json_round_trip_at_every_event_changes_no_decision(
    cfg: ExperimentConfig, pick: Callable[[list[str]], str]
) -> None:
    def early(request_id: str) -> bool:
        return int(request_id) % 4 == 2

    straight = drive(cfg, seed=11, exits_early=early, pick=pick)
    resumed = drive(cfg, seed=11, exits_early=early, pick=pick, round_trip=True)
    assert resumed["log"] == straight["log"]
    assert resumed["progress"] == straight["progress"]
    assert len(straight["shutdowns"]) == 1  # type: ignore[arg-type]


def test_state_is_plain_json() -> None:
    searcher = build_searcher(config("random", max_trials=3, max_concurrent_trials=1), 5)
    searcher.initial_operations()
    searcher.on_trial_exited_early("1", "user_canceled")
    assert searcher.state_dict() == {"created": 2, "ended": ["1"], "invalid": []}
    fresh = build_searcher(config("random", max_trials=3, max_concurrent_trials=1), 5)
    fresh.load_state_dict({})
    assert fresh.state_dict() == {"created": 0, "ended": [], "invalid": []}
