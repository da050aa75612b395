"""Searches through a real cluster: a grid over a Core API script, ASHA stopping and resuming
trials of a Core API script, and adaptive ASHA on the digits example."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORE_SEARCH = REPO / "tests" / "fixtures" / "core_search"
DIGITS = REPO / "examples" / "digits"


def wait_experiment(cluster_api, experiment_id: int, timeout: float = 300) -> dict:
    def ended():
        experiment = cluster_api.get(f"experiments/{experiment_id}/")
        return experiment if experiment["state"] in ("COMPLETED", "CANCELED", "ERROR") else None

    return wait_for(ended, timeout, f"experiment {experiment_id} to end")


def trials_of(cluster_api, experiment_id: int) -> list[dict]:
    return cluster_api.get(f"experiments/{experiment_id}/trials/", limit=500)["results"]


def test_a_grid_over_a_core_api_script_runs_every_point(cluster_api):
    first = cluster_api.submit(CORE_SEARCH / "grid.yaml", CORE_SEARCH)
    experiment = wait_experiment(cluster_api, first["experiment_id"])
    assert experiment["state"] == "COMPLETED" and experiment["progress"] == 1.0
    trials = sorted(trials_of(cluster_api, experiment["id"]), key=lambda t: t["hparams"]["x"])
    assert [t["hparams"]["x"] for t in trials] == [0.0, 0.5, 1.0]
    valid, invalid = trials[:2], trials[2]
    for trial in valid:
        assert trial["state"] == "COMPLETED" and trial["early_exit"] == ""
        assert trial["searcher_completed_length"] == 4 and trial["steps_completed"] == 4
    # x = 1.0 raised InvalidHP: COMPLETED, out of the search; a grid does not replace it.
    assert invalid["state"] == "COMPLETED" and invalid["early_exit"] == "invalid_hp"
    assert invalid["searcher_completed_length"] == 0
    assert experiment["best_validation"] == pytest.approx((0.5 - 0.3) ** 2 + 1 / 4)


def test_asha_stops_trials_and_resumes_promoted_ones_without_repeating_steps(cluster_api):
    first = cluster_api.submit(CORE_SEARCH / "asha.yaml", CORE_SEARCH)
    experiment = wait_experiment(cluster_api, first["experiment_id"])
    assert experiment["state"] == "COMPLETED" and experiment["progress"] == 1.0
    trials = trials_of(cluster_api, experiment["id"])
    assert len(trials) == 6 and {t["request_id"] for t in trials} == {str(i) for i in range(1, 7)}
    assert all(t["state"] == "COMPLETED" and t["searcher_closed"] for t in trials)
    lengths = sorted(t["searcher_completed_length"] for t in trials)
    assert lengths[0] == 4 and lengths[-1] == 16  # rungs at 4, 8 and 16
    # Stopped early at rung 0: at least the worse half, less any trial that was promoted
    # because it was among the best so far when it reported (ASHA never takes one back).
    assert lengths.count(4) >= 2 and lengths.count(16) <= 3
    best = min(trials, key=lambda t: (t["hparams"]["x"] - 0.3) ** 2)
    assert experiment["best_validation"] == pytest.approx(min(t["best_validation"] for t in trials))
    for trial in trials:
        steps, _ = cluster_api.series(trial["id"], "training", "loss")
        # Every batch once, however often the trial was stopped and resumed.
        assert steps == list(range(1, trial["searcher_completed_length"] + 1)), trial["id"]
    resumed = [t for t in trials if t["run_id"] > 1]
    for trial in resumed:
        starts = [line for line in cluster_api.logs(trial["id"]) if '"start_steps"' in line]
        assert len(starts) == trial["run_id"] and '"start_steps": 0' not in starts[-1]
    assert best["searcher_completed_length"] >= 8


def test_adaptive_asha_on_digits_completes_with_some_trials_stopped_early(cluster_api):
    # Rungs at 1 and 2 epochs (of 4 in the example) keep the test short.
    first = cluster_api.submit(
        DIGITS / "adaptive.yaml", DIGITS, max_restarts=0, searcher={"max_length": {"epochs": 2}}
    )
    experiment = wait_experiment(cluster_api, first["experiment_id"], timeout=600)
    assert experiment["state"] == "COMPLETED" and experiment["progress"] == 1.0
    trials = trials_of(cluster_api, experiment["id"])
    assert len(trials) == 8 and all(t["state"] == "COMPLETED" for t in trials)
    lengths = [t["searcher_completed_length"] for t in trials]
    assert max(lengths) == 2 and min(lengths) == 1  # epochs: some trials stopped early
    best = max(t["best_validation"] for t in trials)
    assert experiment["best_validation"] == pytest.approx(best) and best > 0.8
