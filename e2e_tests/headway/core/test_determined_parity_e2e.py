"""Determined 0.38 config forms through a real cluster: a Core API script that never asks for
searcher operations under ``adaptive_asha`` with ``time_metric`` / ``max_time`` (ASHA stops
the losing trials by preemption), ``environment.environment_variables`` reaching the trial's
process, a list ``entrypoint``, and a ``single`` search without ``max_length``."""

from __future__ import annotations

import json

import pytest

from e2e_tests.registry.searcher.test_search_e2e import trials_of, wait_experiment
from tests.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIME_ASHA = REPO / "tests" / "fixtures" / "core_time_asha"


def _json_lines(lines: list[str], key: str) -> list[dict]:
    out = []
    for line in lines:
        start = line.find("{")
        if start >= 0 and f'"{key}"' in line:
            out.append(json.loads(line[start:]))
    return out


def test_time_metric_asha_stops_losing_trials_of_a_script_that_never_asks(cluster_api):
    first = cluster_api.submit(TIME_ASHA / "asha_time.yaml", TIME_ASHA)
    experiment = wait_experiment(cluster_api, first["experiment_id"])
    assert experiment["state"] == "COMPLETED" and experiment["progress"] == 1.0
    trials = trials_of(cluster_api, experiment["id"])
    assert len(trials) == 5 and all(t["state"] == "COMPLETED" for t in trials)
    # No operations: the searcher never gave a length, and the trials never reported one.
    assert all(t["searcher_length"] is None for t in trials)
    assert all(t["searcher_completed_length"] == 0 for t in trials)
    stopped = []
    for trial in trials:
        logs = cluster_api.logs(trial["id"])
        # environment.environment_variables reached the trial's process.
        assert _json_lines(logs, "greeting") == [{"greeting": "hello from the config"}]
        if any("adaptive_asha stops this trial" in line for line in logs):
            stopped.append(trial)
            assert trial["searcher_closed"]
            preempted = _json_lines(logs, "preempted_at")
            if trial["steps_completed"] < 16:
                # Stopped early, by preemption: checkpointed at its last validation, exited 0.
                assert len(preempted) == 1 and preempted[0]["preempted_at"] < 16, preempted
            else:
                # Stopped at the top rung, its last step: the loop may end before it sees the
                # preemption (timing), but never preempted before 16.
                assert [p["preempted_at"] for p in preempted] in ([], [16])
    # The first trial runs alone (max_concurrent_trials: 1): it reaches the top rung (16) and
    # is stopped there; a later trial worse at rung 0 (batches=4) is stopped before the end.
    losers = [t for t in stopped if t["steps_completed"] < 16]
    assert losers, [(t["hparams"]["x"], t["steps_completed"]) for t in trials]
    best = min(trials, key=lambda t: t["best_validation"])
    assert best["steps_completed"] == 16


def test_a_single_search_without_max_length_trains_as_long_as_the_script_says(cluster_api):
    first = cluster_api.submit(TIME_ASHA / "single.yaml", TIME_ASHA)
    experiment = wait_experiment(cluster_api, first["experiment_id"])
    assert experiment["state"] == "COMPLETED" and experiment["progress"] == 1.0
    (trial,) = trials_of(cluster_api, experiment["id"])
    assert trial["state"] == "COMPLETED" and trial["steps_completed"] == 8
    assert trial["searcher_length"] is None and trial["early_exit"] == ""
    assert experiment["best_validation"] == pytest.approx((0.5 - 0.3) ** 2 + 1 / 8)


def test_a_script_that_never_asks_for_its_operations_is_warned_in_its_log(cluster_api):
    # The same script under operation-based ASHA (max_length): it ignores its operations.
    first = cluster_api.submit(
        TIME_ASHA / "asha_time.yaml",
        TIME_ASHA,
        searcher={"time_metric": None, "max_time": None, "max_length": 16, "max_trials": 1},
        hyperparameters={"sleep": 0.0},
    )
    experiment = wait_experiment(cluster_api, first["experiment_id"])
    assert experiment["state"] == "COMPLETED"
    logs = cluster_api.logs(first["id"])
    warnings = [
        line for line in logs if "without calling core_context.searcher.operations()" in line
    ]
    assert len(warnings) == 1  # once, at the first validation
