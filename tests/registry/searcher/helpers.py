"""Shared by the searcher tests: a hyperparameter space, configs, and ``drive``, which runs a
``random``/``grid``/``single`` search to its end with events, optionally with a JSON round trip
of the searcher's state at every event (as the registry rebuilds it)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from headway.expconf import ExperimentConfig, parse_experiment_config
from registry.searcher import (
    Create,
    Operation,
    SearchMethod,
    Shutdown,
    ValidateAfter,
    build_searcher,
)

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


def config(
    name: str, space: dict[str, object] | None = None, **searcher: object
) -> ExperimentConfig:
    """An experiment config of searcher ``name`` over ``space`` (default ``SPACE``, without
    ``count`` unless ``grid``), ``metric: loss``, ``max_length: 10``."""
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


def out_of_order(live: list[str]) -> str:
    """End the newest trial when there are several: a different order than creation."""
    return live[-1] if len(live) > 1 else live[0]


def searcher_without_max_length(**searcher: object) -> SearchMethod:
    """The searcher of a config without ``max_length`` over a two-point space, seed 7."""
    config = parse_experiment_config(
        {
            "entrypoint": "python train.py",
            "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0, "count": 2}},
            "searcher": {"metric": "loss", **searcher},
        }
    )
    return build_searcher(config, seed=7)


def created(ops: list[Operation]) -> list[str]:
    """The request ids of the ``Create`` operations in ``ops``."""
    return [op.request_id for op in ops if isinstance(op, Create)]


def end_every_trial_on_exit(method: SearchMethod) -> tuple[int, bool]:
    """Create every trial ``method`` asks for and end each as its process exits 0, checking
    that no trial gets an operation; return how many ended and whether the search shut down."""
    pending = created(method.initial_operations())
    ended = 0
    shutdown = False
    while pending:
        request_id = pending.pop(0)
        assert method.on_trial_created(request_id) == []  # no ValidateAfter: the script decides
        ops = method.on_trial_closed(request_id)  # its process exited 0
        ended += 1
        assert not any(isinstance(op, ValidateAfter) for op in ops)
        pending += created(ops)
        shutdown = shutdown or any(isinstance(op, Shutdown) for op in ops)
    return ended, shutdown


def assert_round_trips_change_nothing(
    cfg: ExperimentConfig, pick: Callable[[list[str]], str]
) -> None:
    """A JSON round trip of the searcher's state at every event changes no decision of ``cfg``'s
    search (every fourth trial exiting early, the next trial to report chosen by ``pick``)."""

    def early(request_id: str) -> bool:
        return int(request_id) % 4 == 2

    straight = drive(cfg, seed=11, exits_early=early, pick=pick)
    resumed = drive(cfg, seed=11, exits_early=early, pick=pick, round_trip=True)
    assert resumed["log"] == straight["log"]
    assert resumed["progress"] == straight["progress"]
    assert len(straight["shutdowns"]) == 1  # type: ignore[arg-type]
