"""What a worker hands a trial process: the cluster info of a started run (tests that run the
trial process themselves, against the live registry)."""

from __future__ import annotations

import json
import pathlib
from typing import Any


def cluster_info(master_url: str, trial, run, **extra: Any) -> dict[str, Any]:
    """The cluster info (``$HEADWAY_CLUSTER_INFO``'s JSON) of run ``run`` of ``trial``, reading
    the trial again first; ``latest_checkpoint`` is the trial's, ``extra`` adds or replaces
    fields."""
    trial.refresh_from_db()
    info = {
        "master_url": master_url,
        "token": run.token,
        "experiment_id": trial.experiment_id,
        "trial_id": trial.id,
        "run_id": run.run_id,
        "hparams": trial.hparams,
        "trial_seed": 1,
        "latest_checkpoint": str(trial.latest_checkpoint) if trial.latest_checkpoint else None,
        "experiment_config": trial.experiment.config,
    }
    return info | extra


def write_cluster_info(
    master_url: str, trial, run, path: pathlib.Path, **extra: Any
) -> pathlib.Path:
    """``cluster_info`` written to ``path`` (its folder created); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cluster_info(master_url, trial, run, **extra)))
    return path
