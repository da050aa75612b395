"""Helpers for tests of checkpoints and their storage: experiments with a retention policy,
checkpoints stored over REST or registered in place, and the storage locations a test may use
(split from ``tests.helpers``, which they build on)."""

from __future__ import annotations

import json
import uuid as uuid_module
from pathlib import Path

from tests.helpers import TINY_CONFIG, create_experiment, register_checkpoint, start_run


def retention_experiment(api, storage: dict, metric: str = "validation_loss", **searcher):
    """An experiment (created over the API with ``api``) whose ``checkpoint_storage`` is
    ``storage`` (retention fields included); returns its first trial."""
    from registry.models import Trial

    config = {
        "name": "retention",
        "entrypoint": "model_def:TinyTrial",
        "hyperparameters": {"global_batch_size": 8},
        "searcher": {"name": "single", "metric": metric, "max_length": {"batches": 10}, **searcher},
        "checkpoint_storage": storage,
    }
    response = create_experiment(api, config=config)
    assert response.status_code == 201, response.content
    return Trial.objects.get(experiment_id=response.json()["id"])


def stored_checkpoint(
    trial, steps: int, validation: dict | None = None, training: dict | None = None
):
    """Write a checkpoint's file to the trial's storage, register it and report the given
    validation / training metrics at its step (lifecycle and metrics services); returns it."""
    from headway.storage import build_storage_manager
    from registry import metrics

    checkpoint_id = uuid_module.uuid4()
    manager = build_storage_manager(trial.experiment.config["checkpoint_storage"])
    with manager.store_path(str(checkpoint_id)) as path:
        (path / "state-dict.pth").write_bytes(b"x" * 10)
    reports = [
        {"group": group, "steps_completed": steps, "metrics": values}
        for group, values in (("validation", validation), ("training", training))
        if values is not None
    ]
    if reports:
        metrics.metrics_report(trial_id=trial.id, reports=reports)
    return register_checkpoint(trial, uuid=checkpoint_id, steps_completed=steps)


def s3_storage(endpoint: str, **policy) -> dict:
    """An s3 ``checkpoint_storage`` (retention fields ``policy``) in a fresh bucket on the S3
    server at ``endpoint``, allowed as a storage location."""
    import boto3

    bucket = f"gc-{uuid_module.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    return allow_storage(
        {"type": "s3", "bucket": bucket, "prefix": "exp", "endpoint_url": endpoint, **policy}
    )


def unregistered_checkpoint(storage: dict, trial_id: int | None) -> str:
    """Store a checkpoint as trial ``trial_id``'s process does (its marker names that trial)
    and never register it, as a crashed upload leaves it; return its uuid."""
    import pytest

    from headway.storage import build_storage_manager

    storage_id = str(uuid_module.uuid4())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HEADWAY_TRIAL_ID", str(trial_id or ""))
        with build_storage_manager(storage).store_path(storage_id) as path:
            (path / "half-uploaded.bin").write_bytes(b"y" * 5)
    return storage_id


def end_trial(trial, exit_code: int = 0) -> None:
    """Run the trial's queued run to its exit (``exit_code`` 0 completes a single trial)."""
    from registry import lifecycle

    run = start_run(trial)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=exit_code)


def trial_on_storage(api, storage: dict):
    """The trial of a ``TINY_CONFIG`` experiment created over the API with ``api`` whose
    ``checkpoint_storage`` is ``storage``."""
    from registry.models import Trial

    response = create_experiment(
        api, config=TINY_CONFIG + "checkpoint_storage: " + json.dumps(storage) + "\n"
    )
    assert response.status_code == 201, response.json()
    return Trial.objects.get(experiment_id=response.json()["id"])


def store_over_rest(
    api,
    trial,
    files: dict[str, bytes],
    steps_completed: int,
    metadata: dict | None = None,
    resources: dict[str, int] | None = None,
) -> str:
    """Write ``files`` (relative path -> bytes) as a new checkpoint in the trial's storage and
    register it with ``POST trials/{id}/checkpoints/`` (``resources``: what the registry is told,
    by default the files' sizes); return its uuid."""
    from headway.storage import build_storage_manager

    storage_id = str(uuid_module.uuid4())
    manager = build_storage_manager(trial.experiment.config["checkpoint_storage"])
    with manager.store_path(storage_id) as path:
        for name, data in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(data)
    body = {
        "uuid": storage_id,
        "steps_completed": steps_completed,
        "resources": resources or {name: len(data) for name, data in files.items()},
        "metadata": metadata if metadata is not None else {"steps_completed": steps_completed},
    }
    answer = api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert answer.status_code == 201, answer.json()
    return storage_id


class TestStorageLocations:
    """The admin's storage locations in tests (``settings.HEADWAY_STORAGE_LOCATIONS``, set by
    tests/plugin.py for the session): the embedded default (following ``HEADWAY_CHECKPOINT_DIR``, as
    tests move it), pytest's temporary root as the shared_fs location ``pytest-tmp`` (tests
    keep writing ``host_path: <tmp_path>``), and the S3 buckets fixtures create (``allow``).

    Tests of the locations themselves set ``HEADWAY_STORAGE_LOCATIONS`` to a loaded file."""

    __test__ = False  # not a test class, despite its name
    default = "default"

    def __init__(self, tmp_root: Path) -> None:
        from config.storage_locations import StorageLocation

        self.added = {"pytest-tmp": StorageLocation("pytest-tmp", "shared_fs", str(tmp_root))}

    @property
    def locations(self) -> dict:
        from django.conf import settings

        from config.storage_locations import embedded_locations

        return {**embedded_locations(settings.HEADWAY_CHECKPOINT_DIR).locations, **self.added}

    def allow(self, storage: dict) -> dict:
        """Add the bucket and prefix of an s3 ``checkpoint_storage`` as a location; return it."""
        from config.storage_locations import StorageLocation

        name = f"s3-{storage['bucket']}"
        self.added[name] = StorageLocation(
            name,
            "s3",
            bucket=storage["bucket"],
            prefix=str(storage.get("prefix") or "").strip("/"),
            endpoint_url=storage.get("endpoint_url"),
        )
        return storage


def allow_storage(storage: dict) -> dict:
    """Make the bucket of an s3 ``checkpoint_storage`` one of the admin's storage locations of
    this test session (a no-op where the settings hold no ``TestStorageLocations``); return it."""
    from django.conf import settings

    locations = getattr(settings, "HEADWAY_STORAGE_LOCATIONS", None)
    if isinstance(locations, TestStorageLocations):
        locations.allow(storage)
    return storage
