"""Headway's experiments and trials as MLflow's ``Experiment`` and ``Run`` JSON.

The mapping (docs/logging-from-anywhere.md, "MLflow client code"): an MLflow experiment is a
Headway experiment and a run is a trial, both named by their Headway ids (``"7"``); a run's
params are the trial's hparams (strings, as MLflow's), its tags the trial's ``labels``, its
metrics the trial's metric series. A metric key names its series: keys starting with
``val_``, ``val/``, ``eval_``, ``eval/``, ``validation_`` or ``validation/`` are validation
metrics (group ``validation``, what searchers and the dashboard's best validation read), every
other key a training metric (group ``training``), the key unchanged as the metric's name.
Series Headway's own SDK reported are shown too: a validation metric whose name has no such
prefix as ``validation/<name>``, another group's as ``<group>/<name>``.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from registry.models import Experiment, State, Trial

VALIDATION_PREFIXES = ("val_", "val/", "eval_", "eval/", "validation_", "validation/")
RUN_NAME_TAG = "mlflow.runName"
DELETION_STATES = frozenset({State.DELETING, State.DELETED, State.DELETE_FAILED})
# Headway trial states as MLflow run statuses; ACTIVE is RUNNING while a run is live.
_STATUS = {
    State.COMPLETED: "FINISHED",
    State.ERROR: "FAILED",
    State.CANCELED: "KILLED",
    State.PAUSED: "SCHEDULED",
    State.STOPPING_CANCELED: "RUNNING",
    State.STOPPING_KILLED: "RUNNING",
    State.STOPPING_COMPLETED: "RUNNING",
    State.STOPPING_ERROR: "RUNNING",
}


def metric_group(key: str) -> str:
    """The Headway group an MLflow metric key is reported in: ``validation`` or ``training``."""
    return "validation" if key.startswith(VALIDATION_PREFIXES) else "training"


def metric_key(group: str, name: str) -> str:
    """The MLflow key of Headway series ``(group, name)``; ``metric_group`` of a key made by
    MLflow gives back its group, the name being the key."""
    if group == "training" and metric_group(name) == "training":
        return name
    if group == "validation":
        return name if metric_group(name) == "validation" else f"validation/{name}"
    return f"{group}/{name}"


def series_of_key(key: str) -> list[tuple[str, str]]:
    """The ``(group, name)`` series an MLflow key may stand for, most likely first (the
    inverse of ``metric_key``)."""
    out = [(metric_group(key), key)]
    if "/" in key:
        group, name = key.split("/", 1)
        out.append((group, name))
    return out


def millis(moment: datetime | None) -> int | None:
    """A datetime as MLflow's milliseconds since the epoch (None stays None)."""
    return None if moment is None else int(moment.timestamp() * 1000)


def experiment_json(experiment: Experiment) -> dict[str, Any]:
    """MLflow's ``Experiment`` message (``mlflow/protos/service.proto``)."""
    moment = experiment.ended_at or experiment.created_at
    return {
        "experiment_id": str(experiment.id),
        "name": experiment.name,
        "artifact_location": f"mlflow-artifacts:/{experiment.id}",
        "lifecycle_stage": "deleted" if experiment.state in DELETION_STATES else "active",
        "creation_time": millis(experiment.created_at),
        "last_update_time": millis(moment),
        "tags": [],
    }


def run_status(trial: Trial, live: bool) -> str:
    """The MLflow status of a trial; ``live``: it has a run that has not exited."""
    if trial.state == State.ACTIVE:
        return "RUNNING" if live else "SCHEDULED"
    return _STATUS.get(State(trial.state), "FAILED")


def param_value(value: Any) -> str:
    """An hparam as MLflow's string param (JSON for anything but a string)."""
    return value if isinstance(value, str) else json.dumps(value)


def metric_number(value: Any) -> float | None:
    """A stored metric value as a float; None for text and other non-numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    if isinstance(value, str):  # non-finite values are stored as these strings
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value)
    return float(value)


def json_number(value: float) -> float | str:
    """A float for MLflow's JSON: non-finite values as protobuf's JSON strings."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def run_metrics(trial: Trial) -> list[dict[str, Any]]:
    """The latest value of each numeric series (``Trial.summary_metrics``)."""
    out = []
    for group, series in sorted((trial.summary_metrics or {}).items()):
        for name, entry in sorted(series.items()):
            value = metric_number(entry.get("last"))
            if value is None:
                continue
            out.append(
                {
                    "key": metric_key(group, name),
                    "value": json_number(value),
                    "timestamp": 0,
                    "step": int(entry.get("last_step") or 0),
                }
            )
    return out


def run_json(trial: Trial, experiment: Experiment, live: bool, user_name: str) -> dict[str, Any]:
    """MLflow's ``Run`` message of ``trial`` (``info``, ``data``, empty ``inputs``)."""
    labels = trial.labels or {}
    name = labels.get(RUN_NAME_TAG) or f"trial-{trial.id}"
    info: dict[str, Any] = {
        "run_id": str(trial.id),
        "run_uuid": str(trial.id),
        "run_name": name,
        "experiment_id": str(experiment.id),
        "user_id": user_name,
        "status": run_status(trial, live),
        "start_time": millis(trial.created_at),
        "artifact_uri": f"mlflow-artifacts:/{experiment.id}/{trial.id}/artifacts",
        "lifecycle_stage": "deleted" if experiment.state in DELETION_STATES else "active",
    }
    if trial.ended_at is not None:
        info["end_time"] = millis(trial.ended_at)
    data = {
        "metrics": run_metrics(trial),
        "params": [
            {"key": k, "value": param_value(v)} for k, v in sorted((trial.hparams or {}).items())
        ],
        "tags": [{"key": k, "value": str(v)} for k, v in sorted(labels.items())],
    }
    return {"info": info, "data": data, "inputs": {}}


def run_facts(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A ``run_json`` as the search filter sees it (``filters.RunFacts``)."""
    data, info = run["data"], run["info"]
    return {
        "metrics": {m["key"]: m["value"] for m in data["metrics"]},
        "params": {p["key"]: p["value"] for p in data["params"]},
        "tags": {t["key"]: t["value"] for t in data["tags"]},
        "attributes": {
            "status": info["status"],
            "run_name": info["run_name"],
            "run_id": info["run_id"],
            "start_time": info["start_time"],
            "end_time": info.get("end_time"),
        },
    }
