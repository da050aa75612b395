"""Checkpoint GC end to end: a Core API trial through a Celery worker keeps its best and latest.

The unit tests of the retention policy are in tests/registry/checkpoints/test_checkpoint_retention.py."""

from __future__ import annotations

import pytest

from headway.storage import build_storage_manager
from tests.helpers import REPO, wait_for

FIXTURES = REPO / "tests" / "fixtures"


@pytest.mark.integration
@pytest.mark.slow
def test_gc_after_a_real_trial_keeps_its_best_and_latest_checkpoints(cluster_api):
    trial = cluster_api.submit(FIXTURES / "retention" / "exp.yaml", FIXTURES / "retention")
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")

    def collected():
        rows = cluster_api.get(f"trials/{trial['id']}/checkpoints/", order_by="steps_completed")
        states = {row["steps_completed"]: row["state"] for row in rows["results"]}
        return (
            rows["results"]
            if list(states.values()).count("COMPLETED") == 2 and len(states) == 6
            else None
        )

    rows = wait_for(collected, 60, "GC to leave two checkpoints")
    kept = {row["steps_completed"] for row in rows if row["state"] == "COMPLETED"}
    # exp.yaml reports validation_loss 5, 1, 4, 3, 2, 6 at steps 1..6: best is step 2.
    assert kept == {2, 6}
    assert {row["steps_completed"] for row in rows if row["best"]} == {2}
    assert [row["uuid"] for row in rows if row["latest"]] == [done["latest_checkpoint"]]
    for row in rows:
        exists = build_storage_manager(row["storage"]).exists(row["uuid"])
        assert exists is (row["state"] == "COMPLETED"), row
