"""What the MLflow-compatible API does to Headway's experiments, trials and metric store.

Every write goes through ``registry.lifecycle`` (unmanaged experiments, trials and runs) and
``registry.metrics.metrics_report``; every check through ``registry.authz``: anyone logged in
reads, only the owner writes (an admin may delete, never write into another user's run). An
MLflow run is an unmanaged trial with one live unmanaged run: MLflow's client does not
heartbeat, so each write to the run (a metric, param or tag, a status update) counts as its
heartbeat, and a run left without one for ``HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS`` is
lost (its trial ends ERROR), as a ``core_v2`` script's would be.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from registry import lifecycle
from registry.api.mlflow.entities import (
    DELETION_STATES,
    RUN_NAME_TAG,
    metric_group,
)
from registry.api.mlflow.errors import MlflowError, invalid, not_found
from registry.authz import (
    NotPermitted,
    ensure_can_change_experiment,
    ensure_can_write_trial_data,
    scoped,
)
from registry.lifecycle._common import refresh_experiment
from registry.lifecycle._unmanaged import _experiment, _new_run, _trial, unmanaged_config
from registry.metrics import metrics_report, parse_reports
from registry.models import TERMINAL_STATES, Experiment, RunState, Trial, TrialRun, lock_trial
from registry.models.experiment import blob_fields

DEFAULT_EXPERIMENT = "Default"
# MLflow's own limits (mlflow/utils/validation.py), so a script that works against MLflow's
# server is refused here for the same inputs only.
MAX_KEY_CHARS = 250
MAX_PARAM_VALUE_CHARS = 6000
MAX_TAG_VALUE_CHARS = 8000
MAX_BATCH_METRICS = 1000
MAX_BATCH_PARAMS = 100
MAX_BATCH_TAGS = 100


def _int_id(value: Any, field: str) -> int:
    text = str(value or "")
    if not text.isdigit() or len(text) > 18:
        raise not_found(f"No {field.replace('_', ' ')} {value!r}: ids are Headway ids (digits).")
    return int(text)


def experiment(user: Any, experiment_id: Any) -> Experiment:
    """The experiment MLflow id ``experiment_id`` names; ``"0"`` (MLflow's default experiment)
    is the caller's unmanaged experiment named ``Default``, made on first use.

    Raises:
        MlflowError: ``RESOURCE_DOES_NOT_EXIST`` for an unknown or malformed id.
    """
    if str(experiment_id) == "0":
        found = by_name(user, DEFAULT_EXPERIMENT)
        return found if found is not None else create_experiment(user, DEFAULT_EXPERIMENT)
    pk = _int_id(experiment_id, "experiment_id")
    found = scoped(Experiment.objects.without_blobs(), user).filter(id=pk).first()
    if found is None:
        raise not_found(f"No experiment with id {experiment_id}.")
    return found


def by_name(user: Any, name: str) -> Experiment | None:
    """The caller's newest experiment called ``name`` that is not being deleted, or None.

    Headway's experiment names are not unique: each user's names are their MLflow namespace.
    """
    return (
        scoped(Experiment.objects.without_blobs(), user)
        .filter(owner=user, name=name)
        .exclude(state__in=DELETION_STATES)
        .order_by("-id")
        .first()
    )


def create_experiment(user: Any, name: Any, artifact_location: Any = None) -> Experiment:
    """A new unmanaged experiment of ``user`` called ``name`` (no trials yet).

    Raises:
        MlflowError: ``INVALID_PARAMETER_VALUE`` for an empty name or an ``artifact_location``
            (artifacts go to the admin's storage location, never a place the client names);
            ``RESOURCE_ALREADY_EXISTS`` when the caller has an experiment of that name.
    """
    if not isinstance(name, str) or not name.strip():
        raise invalid("Experiment name must be a non-empty string.")
    if artifact_location:
        raise invalid(
            "artifact_location is not supported: artifacts are stored in the server's storage "
            "location (mlflow-artifacts:/<experiment_id>)."
        )
    if by_name(user, name) is not None:
        raise MlflowError("RESOURCE_ALREADY_EXISTS", f"Experiment '{name}' already exists.")
    config = unmanaged_config({"name": name})
    return _experiment(user, config, "")


def rename_experiment(user: Any, found: Experiment, new_name: Any) -> None:
    """Rename (``experiments/update``); owner or admin."""
    if not isinstance(new_name, str) or not new_name.strip():
        raise invalid("new_name must be a non-empty string.")
    ensure_can_change_experiment(user, found.id)
    lifecycle.experiment_patch(experiment_id=found.id, name=new_name)


def delete_experiment(user: Any, found: Experiment) -> None:
    """Delete (``experiments/delete``): an ended experiment, or one with no live run, which
    is ended CANCELED first; one with live runs is a ``RESOURCE_CONFLICT``."""
    ensure_can_change_experiment(user, found.id)
    if found.state in DELETION_STATES:
        return
    if found.state not in TERMINAL_STATES:
        live = Trial.objects.filter(experiment=found).exclude(state__in=TERMINAL_STATES)
        if live.exists():
            raise MlflowError(
                "RESOURCE_CONFLICT",
                f"Experiment {found.id} has runs that have not ended; end them (end_run) first.",
            )
        lifecycle.experiment_cancel(experiment_id=found.id)
    lifecycle.experiment_delete(experiment_id=found.id, user=user)


def trial(user: Any, run_id: Any) -> Trial:
    """The trial MLflow run id ``run_id`` names (its experiment loaded), in a workspace where
    ``user`` has a role.

    Raises:
        MlflowError: ``RESOURCE_DOES_NOT_EXIST``, also for a run the user may not read.
    """
    pk = _int_id(run_id, "run_id")
    found = (
        scoped(Trial.objects.select_related("experiment"), user)
        .defer(*blob_fields("experiment__"))  # a metric report needs no model definition
        .filter(id=pk)
        .first()
    )
    if found is None:
        raise not_found(f"Run '{run_id}' not found.")
    return found


def _ensure_writer(user: Any, found: Trial) -> None:
    ensure_can_write_trial_data(user, found.id, run_trial_id=None)


def create_run(user: Any, found: Experiment, run_name: Any, tags: dict[Any, Any]) -> Trial:
    """A new trial of unmanaged experiment ``found`` with a live unmanaged run; its labels
    are ``tags`` (and ``mlflow.runName``).

    Raises:
        NotPermitted: (``PERMISSION_DENIED``) the caller does not own the experiment.
        MlflowError: ``INVALID_PARAMETER_VALUE`` for a managed experiment (a pool launches
            its trials) or one being deleted.
    """
    if user.pk != found.owner_id:
        raise NotPermitted(f"Only the owner of experiment {found.id} may create runs in it.")
    if not found.unmanaged or found.state in DELETION_STATES:
        why = "being deleted" if found.unmanaged else "launched by a resource pool"
        raise invalid(f"Experiment {found.id} is {why}; MLflow runs cannot be created in it.")
    labels = _checked_tags(tags)
    if run_name:
        labels[RUN_NAME_TAG] = _checked_tags({RUN_NAME_TAG: run_name})[RUN_NAME_TAG]
    with transaction.atomic():
        made, _ = _trial(found, "", {})
        made = lock_trial(made.id)
        _new_run(made)
        made.labels = labels
        made.save(update_fields=["labels"])
        refresh_experiment(found.id)
    return trial(user, made.id)


def live_run(found: Trial) -> TrialRun | None:
    """The trial's unmanaged run that has not exited, if any."""
    return (
        TrialRun.objects.filter(trial=found, run_id=found.run_id, unmanaged__isnull=False)
        .exclude(state=RunState.EXITED)
        .first()
    )


def _touch(found: Trial) -> None:
    """A write to the run is its heartbeat (the MLflow client sends none)."""
    lifecycle.unmanaged_heartbeat(trial_id=found.id, run_id=found.run_id)


def end_run(user: Any, found: Trial, status: Any) -> None:
    """``runs/update`` with a status: FINISHED → COMPLETED, FAILED → ERROR, KILLED → the trial
    killed (CANCELED); RUNNING heartbeats. Ending an ended run changes nothing.

    Raises:
        MlflowError: ``INVALID_PARAMETER_VALUE`` for SCHEDULED or an unknown status.
    """
    _ensure_writer(user, found)
    if status in (None, "", "RUNNING"):
        _touch(found)
        return
    if status not in ("FINISHED", "FAILED", "KILLED"):
        raise invalid(
            f"Invalid run status {status!r}: a run is set RUNNING, FINISHED, FAILED or KILLED."
        )
    if not found.experiment.unmanaged:
        raise invalid(f"Run {found.id} is a trial a resource pool launched; end it from Headway.")
    run = live_run(found)
    if run is None:
        return
    if status == "KILLED" and found.state not in TERMINAL_STATES:
        lifecycle.trial_kill(trial_id=found.id)
    lifecycle.unmanaged_run_exited(
        trial_id=found.id, run_id=run.run_id, exit_code=0 if status == "FINISHED" else 1
    )


def _checked_key(key: Any, what: str) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or "\x00" in key:
        raise invalid(f"Invalid {what} key {key!r}: 1 to {MAX_KEY_CHARS} characters, no NUL.")
    return key


def _checked_tags(tags: dict[Any, Any]) -> dict[str, str]:
    out = {}
    for key, value in tags.items():
        text = "" if value is None else str(value)
        if len(text) > MAX_TAG_VALUE_CHARS or "\x00" in text:
            raise invalid(f"Tag {key!r}: a value of at most {MAX_TAG_VALUE_CHARS} characters.")
        out[_checked_key(key, "tag")] = text
    return out


def _reports(metrics: Iterable[dict[str, Any]], run_id: int) -> list[Any]:
    """MLflow metrics as Headway reports: one per (group, step), the later value winning."""
    by_step: dict[tuple[str, int], dict[str, Any]] = {}
    for metric in metrics:
        key = _checked_key(metric.get("key"), "metric")
        step = metric.get("step") or 0
        if isinstance(step, str) and step.lstrip("-").isdigit():
            step = int(step)  # protobuf's JSON may spell int64 values as strings
        if not isinstance(step, int) or step < 0:
            raise invalid(f"Metric {key!r}: step must be an integer of at least 0, got {step!r}.")
        stamp = metric.get("timestamp")
        try:
            moment = datetime.fromtimestamp(int(stamp) / 1000, tz=UTC) if stamp else None
        except (TypeError, ValueError, OverflowError, OSError):
            raise invalid(
                f"Metric {key!r}: timestamp must be milliseconds, got {stamp!r}."
            ) from None
        report = by_step.setdefault(
            (metric_group(key), step),
            {"group": metric_group(key), "steps_completed": step, "metrics": {}, "run_id": run_id},
        )
        value = metric.get("value")
        if isinstance(value, bool) or not (
            isinstance(value, int | float) or value in ("NaN", "Infinity", "-Infinity")
        ):
            raise invalid(f"Metric {key!r}: value must be a number, got {value!r}.")
        report["metrics"][key] = value
        if moment is not None:
            report["timestamp"] = moment
    return list(by_step.values())


def log_batch(
    user: Any,
    found: Trial,
    metrics: list[dict[str, Any]],
    params: list[dict[str, Any]],
    tags: list[dict[str, Any]],
) -> None:
    """``runs/log-batch`` (and the one-item calls): params into the trial's hparams (a key
    keeps its first value, as MLflow's), tags into its labels, metrics into its series.

    Raises:
        NotPermitted: not the trial's owner.
        MlflowError: ``INVALID_PARAMETER_VALUE`` for a batch over MLflow's limits, a bad key,
            a param logged again with another value, a metric the store refuses.
    """
    _ensure_writer(user, found)
    if (
        len(metrics) > MAX_BATCH_METRICS
        or len(params) > MAX_BATCH_PARAMS
        or len(tags) > MAX_BATCH_TAGS
    ):
        raise invalid(
            f"A batch holds at most {MAX_BATCH_METRICS} metrics, {MAX_BATCH_PARAMS} params and "
            f"{MAX_BATCH_TAGS} tags."
        )
    new_params: dict[str, str] = {}
    for param in params:
        key = _checked_key(param.get("key"), "param")
        value = "" if param.get("value") is None else str(param.get("value"))
        if len(value) > MAX_PARAM_VALUE_CHARS:
            raise invalid(f"Param {key!r}: a value of at most {MAX_PARAM_VALUE_CHARS} characters.")
        new_params[key] = value
    new_tags = _checked_tags({t.get("key"): t.get("value") for t in tags})
    if (new_params or new_tags) and not found.experiment.unmanaged:
        # A managed trial's hparams are its searcher's; the REST API edits neither them nor labels.
        raise invalid(
            f"Run {found.id} is a trial a resource pool launched: its params and tags are "
            "Headway's (metrics may be logged by its owner)."
        )
    reports = parse_reports({"reports": _reports(metrics, found.run_id)}) if metrics else []
    if new_params or new_tags:
        with transaction.atomic():
            locked = lock_trial(found.id)
            hparams = dict(locked.hparams or {})
            for key, value in new_params.items():
                old = hparams.get(key)
                if old is not None and str(old) != value:
                    raise invalid(
                        f"Changing param values is not allowed. Param with key='{key}' was "
                        f"already logged with value='{old}' for run ID='{found.id}'. "
                        f"Attempted logging new value '{value}'."
                    )
                hparams[key] = value
            locked.hparams = hparams
            locked.labels = {**(locked.labels or {}), **new_tags}
            locked.save(update_fields=["hparams", "labels"])
    if reports:
        metrics_report(trial_id=found.id, reports=reports, run_id=found.run_id)
    _touch(found)


def delete_tag(user: Any, found: Trial, key: Any) -> None:
    """``runs/delete-tag``; ``RESOURCE_DOES_NOT_EXIST`` for a tag the run does not have."""
    _ensure_writer(user, found)
    if not found.experiment.unmanaged:
        raise invalid(
            f"Run {found.id} is a trial a resource pool launched: its tags are Headway's."
        )
    with transaction.atomic():
        locked = lock_trial(found.id)
        labels = dict(locked.labels or {})
        if key not in labels:
            raise not_found(f"No tag with name: {key} in run with id {found.id}")
        del labels[key]
        locked.labels = labels
        locked.save(update_fields=["labels"])
    _touch(found)
