"""A trial whose checkpoints go to S3 (moto's server over HTTP) pauses, then resumes from the
checkpoint its new run restores from S3, through a real cluster (Celery workers, PostgreSQL)."""

from __future__ import annotations

import json
import uuid

import pytest

from headway.storage import build_storage_manager
from tests.helpers import REPO, start_host_workers, stop_workers, wait_for
from tests.helpers_checkpoints import allow_storage

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORE_API = REPO / "tests" / "fixtures" / "core_api"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture
def s3_hosts(cluster, cluster_api, s3_endpoint, settings, tmp_path):
    """Workers of their own pool whose trial processes have S3 credentials; yields the
    ``checkpoint_storage`` of a fresh bucket."""
    from registry.models import WorkerHost

    storage = {
        "type": "s3",
        "bucket": f"e2e-{uuid.uuid4().hex[:8]}",
        "prefix": "runs",
        "endpoint_url": s3_endpoint,
    }
    build_storage_manager(storage)._client.create_bucket(Bucket=storage["bucket"])
    allow_storage(storage)
    pool = f"headway-s3-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    workers = start_host_workers(
        cluster.env, tmp_path, pool, 1, HEADWAY_STORAGE_ENDPOINTS=s3_endpoint, **AWS_ENV
    )
    try:
        wait_for(
            lambda: WorkerHost.objects.filter(namespace=pool).alive().count() == 2, 60, "S3 workers"
        )
        yield storage
    finally:
        stop_workers(workers)


def _log_json(lines: list[str], key: str) -> dict:
    return next(json.loads(line) for line in lines if line.startswith("{") and key in line)


def test_a_trial_on_s3_pauses_and_resumes_from_a_checkpoint_restored_from_s3(cluster_api, s3_hosts):
    storage = s3_hosts
    trial = cluster_api.submit(
        CORE_API / "exp.yaml", CORE_API, checkpoint_storage=storage, hyperparameters={"sleep": 0.3}
    )
    cluster_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 2, "two epochs")
    cluster_api.post(f"trials/{trial['id']}/pause")
    paused = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    latest = paused["latest_checkpoint"]
    manager = build_storage_manager(storage)
    stored = set(manager.list_files(latest))  # in the bucket
    # Besides the trial's files, the automatic TensorBoard events (on by default).
    tensorboard = {name for name in stored if name.startswith("tensorboard/events.out.tfevents.")}
    assert tensorboard and stored - tensorboard == {"model.pth", "metadata.json"}

    cluster_api.post(f"trials/{trial['id']}/activate")
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2
    restored = _log_json(cluster_api.logs(trial["id"]), "restored")
    assert restored["restored"] == latest
    assert restored["start_epoch"] == paused["steps_completed"]
    steps, _ = cluster_api.series(trial["id"], "training", "loss")
    assert steps == list(range(1, 9))  # no epoch trained twice, none skipped

    # The registry serves the S3 checkpoint to a user holding only a Headway token (the final
    # one: retention may already have deleted the one the trial paused at).
    final = done["latest_checkpoint"]
    response = cluster_api.http.get(
        f"{cluster_api.url}/api/v1/checkpoints/{final}/download",
        params={"path": "model.pth"},
        timeout=60,
    )
    assert response.status_code == 200
    with manager.open_file(final, "model.pth") as fh:
        assert response.content == fh.read()
