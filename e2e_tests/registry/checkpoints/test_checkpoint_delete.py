"""Experiment deletion through a real Celery worker: the task deletes it end to end.

The unit tests of deletion are in tests/registry/checkpoints/test_checkpoint_delete.py."""

from __future__ import annotations

import pytest

from headway.storage import build_storage_manager
from tests.helpers import REPO, wait_for

FIXTURES = REPO / "tests" / "fixtures"


@pytest.mark.integration
@pytest.mark.slow
def test_a_deleted_experiment_is_gone_after_the_worker_s_task(cluster_api):
    trial = cluster_api.submit(FIXTURES / "retention" / "exp.yaml", FIXTURES / "retention")
    cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    experiment_id = trial["experiment_id"]
    rows = cluster_api.get(f"trials/{trial['id']}/checkpoints/")["results"]
    response = cluster_api.http.delete(f"{cluster_api.url}/api/v1/experiments/{experiment_id}/")
    assert response.status_code == 202, response.text

    def gone():
        answer = cluster_api.http.get(f"{cluster_api.url}/api/v1/experiments/{experiment_id}/")
        return answer.status_code == 404

    wait_for(gone, 60, f"experiment {experiment_id} to be deleted")
    for row in rows:
        assert not build_storage_manager(row["storage"]).exists(row["uuid"])
