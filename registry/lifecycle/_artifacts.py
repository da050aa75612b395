"""The files MLflow's client uploads for a run (``registry/api/mlflow/artifacts.py``): where they
live, and their deletion with their experiment.

A trial's artifacts are the folder ``.mlflow-artifacts/<trial id>/`` in its experiment's
checkpoint storage location, next to its checkpoints: a name no checkpoint id can take
(``headway.storage.check_storage_id``), so checkpoint GC and orphan clean-up never list it.
shared_fs locations only.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from headway.storage import SharedFSStorageManager
from registry.errors import InvalidInput
from registry.models import Trial
from registry.storage_locations import location_manager

ARTIFACTS_FOLDER = ".mlflow-artifacts"


def artifacts_root(storage: dict[str, Any] | None, trial_id: int) -> Path | None:
    """The artifact folder of trial ``trial_id`` under the experiment's ``checkpoint_storage``
    (not created here); None when the location is not shared_fs.

    Raises:
        InvalidInput: the stored storage no longer lies in an admin location
            (``registry.storage_locations.location_manager``).
    """
    manager = location_manager(storage or {})
    if not isinstance(manager, SharedFSStorageManager):
        return None
    return manager.base_path / ARTIFACTS_FOLDER / str(trial_id)


def delete_artifacts(experiment_id: int, storage: dict[str, Any] | None) -> dict[int, str]:
    """Delete the artifact folders of the experiment's trials; return ``{trial id: error}``
    for those that could not be deleted. A folder that is a symbolic link is unlinked, never
    followed; a location that is no longer configured holds nothing Headway can reach."""
    failed: dict[int, str] = {}
    for trial_id in Trial.objects.filter(experiment_id=experiment_id).values_list("id", flat=True):
        try:
            root = artifacts_root(storage, trial_id)
        except (InvalidInput, ValueError):
            return {}
        if root is None:
            return {}
        try:
            if root.is_symlink():
                root.unlink()
            elif root.exists():
                shutil.rmtree(root)
        except OSError as exc:
            failed[trial_id] = str(exc)
    return failed
