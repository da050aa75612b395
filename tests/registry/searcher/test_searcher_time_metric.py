"""Searchers without ``max_length`` (Determined 0.38): ``single``/``random``/``grid`` give no
operations and end trials when their processes exit; ``adaptive_asha`` with ``time_metric`` /
``max_time`` stops losing trials (``Stop``), replaces them, and survives a JSON round trip."""

from __future__ import annotations

import json

import pytest

from headway.early_exit import EarlyExitReason
from headway.expconf import parse_experiment_config
from registry.searcher import (
    Create,
    Operation,
    SearchMethod,
    Shutdown,
    Stop,
    ValidateAfter,
    build_searcher,
)

SPACE = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0, "count": 2}}


def searcher_for(**searcher: object) -> SearchMethod:
    config = parse_experiment_config(
        {"entrypoint": "python train.py", "hyperparameters": SPACE, "searcher": searcher}
    )
    return build_searcher(config, seed=7)


def created(ops: list[Operation]) -> list[str]:
    return [op.request_id for op in ops if isinstance(op, Create)]


def roundtrip(method: SearchMethod, **searcher: object) -> SearchMethod:
    fresh = searcher_for(**searcher)
    fresh.load_state_dict(json.loads(json.dumps(method.state_dict())))
    return fresh


@pytest.mark.parametrize(
    "searcher",
    [
        {"name": "single"},
        {"name": "random", "max_trials": 2, "max_concurrent_trials": 1},
        {"name": "grid", "max_concurrent_trials": 1},
    ],
    ids=["single", "random", "grid"],
)
def test_without_max_length_trials_get_no_operation_and_end_on_exit(searcher: dict) -> None:
    method = searcher_for(metric="loss", **searcher)
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
    assert shutdown and ended == {"single": 1, "random": 2, "grid": 2}[searcher["name"]]


TIME_ASHA = {
    "name": "adaptive_asha",
    "metric": "loss",
    "time_metric": "batches",
    "max_time": 16,
    "max_trials": 4,
    "max_rungs": 3,
    "divisor": 2,
    "mode": "aggressive",
    "max_concurrent_trials": 2,
}


def test_time_asha_stops_a_loser_and_replaces_it() -> None:
    method = searcher_for(**TIME_ASHA)
    first, second = created(method.initial_operations())
    for request_id in (first, second):
        assert method.on_trial_created(request_id) == []
    # Below the first rung (4 batches): nothing to decide yet.
    assert method.on_validation_reported(first, 0.5, 2) == []
    # Rungs at 4, 8, 16. The first result of a rung goes on.
    assert method.on_validation_reported(first, 0.5, 4) == []
    method = roundtrip(method, **TIME_ASHA)
    # A worse second result at rung 0 is stopped, and a new trial takes its place.
    ops = method.on_validation_reported(second, 0.9, 4)
    assert ops[0] == Stop(second) and len(created(ops)) == 1
    # Reports after the stop change nothing.
    assert method.on_validation_reported(second, 0.1, 8) == []
    # One report may pass several rungs: the first trial reaches the top (16) and is stopped.
    ops = method.on_validation_reported(first, 0.4, 16)
    assert ops[0] == Stop(first) and len(created(ops)) == 1


def test_time_asha_larger_is_better_and_nan_ranks_last() -> None:
    method = searcher_for(**{**TIME_ASHA, "smaller_is_better": False})
    first, second = created(method.initial_operations())
    assert method.on_validation_reported(first, float("nan"), 4) == []
    # 0.2 is better than NaN: it goes on, NaN stays below it.
    assert method.on_validation_reported(second, 0.2, 4) == []


def test_time_asha_ends_after_max_trials_have_ended() -> None:
    method = searcher_for(**TIME_ASHA)
    pending = created(method.initial_operations())
    ended: list[str] = []
    shutdown = False
    while pending:
        request_id = pending.pop(0)
        ops = method.on_validation_reported(request_id, float(len(ended)), 4)
        pending += created(ops)
        if any(isinstance(op, Stop) for op in ops):
            ops = method.on_trial_closed(request_id)  # the stopped trial exits 0
        else:
            ops = method.on_trial_closed(request_id)  # its script ended before the top rung
        ended.append(request_id)
        pending += created(ops)
        shutdown = shutdown or any(isinstance(op, Shutdown) for op in ops)
        method = roundtrip(method, **TIME_ASHA)
    assert len(ended) == 4 and shutdown
    assert method.progress() == 1.0


def test_time_asha_replaces_an_invalid_trial_without_counting_it() -> None:
    method = searcher_for(**{**TIME_ASHA, "max_trials": 2})
    first, second = created(method.initial_operations())
    ops = method.on_trial_exited_early(first, EarlyExitReason.INVALID_HP)
    (replacement,) = created(ops)
    assert replacement not in (first, second)
    # An errored trial counts: no replacement once max_trials valid trials exist.
    assert created(method.on_trial_exited_early(second, EarlyExitReason.ERRORED)) == []
