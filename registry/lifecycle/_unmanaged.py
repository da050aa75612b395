"""Unmanaged experiments, trials and runs: made by a script itself (``core_v2.init()``).

Determined 0.38's unmanaged mode (``CreateExperiment(unmanaged=True)``, ``PutExperiment`` /
``PutTrial`` on external ids, ``StartTrial``) in one call: ``unmanaged_start`` finds or creates
the user's experiment (by ``external_experiment_id``) and trial (by ``external_trial_id``) and
starts a new run of it, RUNNING at once with its own run token. Nothing is scheduled and no model
definition is stored. The run heartbeats (``unmanaged_heartbeat``); ``unmanaged_run_exited``
ends it (``close()``: COMPLETED, an exception in the script: ERROR); one whose heartbeats stop
for ``HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS`` is lost and its trial ends ERROR
(``reap_lost_unmanaged_runs``). Running the script again with the same external ids resumes the
trial: a new run continues its metrics and finds its latest checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from headway.expconf import ExperimentConfig
from registry.errors import IllegalTransition, InvalidInput
from registry.jsonsafe import check_json_size, json_storage_problem
from registry.lifecycle._common import refresh_experiment, trial_end
from registry.lifecycle._experiments import _complete_config, parse_config_or_400
from registry.lifecycle._log_batches import LogLine, store_lines
from registry.models import (
    TERMINAL_STATES,
    Checkpoint,
    Experiment,
    RunState,
    State,
    Trial,
    TrialLog,
    TrialRun,
    UnmanagedRun,
    lock_trial,
)
from registry.storage_endpoints import check_storage_endpoint
from registry.storage_locations import resolve_storage
from registry.workspaces import resolve_config_project

logger = logging.getLogger("headway.lifecycle")

# The config fields an unmanaged experiment takes (Determined's ``core_v2.Config``); the rest
# (entrypoint, resources, max_restarts, ...) are about launching, which nothing does here.
UNMANAGED_CONFIG_FIELDS = frozenset(
    {
        "name",
        "description",
        "labels",
        "data",
        "searcher",
        "checkpoint_storage",
        "workspace",
        "project",
    }
)
# Stored as the experiment's entrypoint: the schema requires one; it is never run.
UNMANAGED_ENTRYPOINT = "unmanaged"
EXTERNAL_ID_MAX = 256
DELETION_STATES = frozenset({State.DELETING, State.DELETED, State.DELETE_FAILED})
STOPPING = frozenset({State.STOPPING_CANCELED, State.STOPPING_KILLED})


@dataclasses.dataclass(frozen=True)
class UnmanagedStart:
    """What ``unmanaged_start`` made or found: the run to report as, and where to resume."""

    experiment: Experiment
    trial: Trial
    run: TrialRun
    resumed: bool
    latest_checkpoint: str | None
    latest_checkpoint_steps: int | None


def unmanaged_config(source: Any) -> ExperimentConfig:
    """Validate an unmanaged experiment's config and resolve its checkpoint storage.

    The searcher is ``single`` without ``max_length`` (the script decides how long it trains;
    ``metric`` defaults to ``"unmanaged"``, as Determined's); ``checkpoint_storage`` must name
    one of the admin's storage locations (``registry.storage_locations``), never a path of the
    user's choosing outside them.

    Raises:
        InvalidInput: naming the field (``config.<field>``): not a mapping, a field unmanaged
            experiments do not take, another searcher, ``searcher.max_length``, an unknown
            storage location, or anything the experiment schema refuses.
    """
    if not isinstance(source, dict):
        raise InvalidInput({"config": ["Must be a mapping of config fields."]})
    unsupported = sorted(set(source) - UNMANAGED_CONFIG_FIELDS)
    if unsupported:
        allowed = ", ".join(sorted(UNMANAGED_CONFIG_FIELDS))
        raise InvalidInput(
            {
                f"config.{name}": [
                    f"Not supported for unmanaged experiments (they take {allowed})."
                ]
                for name in unsupported
            }
        )
    searcher = source.get("searcher") or {}
    if not isinstance(searcher, dict):
        raise InvalidInput({"config.searcher": ["Must be a mapping."]})
    if searcher.get("name", "single") != "single":
        raise InvalidInput(
            {"config.searcher.name": ["Unmanaged experiments use the single searcher."]}
        )
    if searcher.get("max_length") is not None:
        raise InvalidInput(
            {"config.searcher.max_length": ["An unmanaged trial trains as long as its script."]}
        )
    data = {
        **source,
        "searcher": {"name": "single", "metric": "unmanaged", **searcher},
        "entrypoint": UNMANAGED_ENTRYPOINT,
        "max_restarts": 0,
    }
    config = parse_config_or_400(data)
    raw_storage = config.to_dict().get("checkpoint_storage")
    check_storage_endpoint(raw_storage)  # SSRF: allow-list only
    return _complete_config(config, resolve_storage(raw_storage))


def _external_id(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > EXTERNAL_ID_MAX or "\x00" in value:
        raise InvalidInput({field: [f"Must be a string of at most {EXTERNAL_ID_MAX} characters."]})
    return value


def unmanaged_start(
    *,
    owner: Any,
    config_source: Any,
    external_experiment_id: str | None = None,
    external_trial_id: str | None = None,
    hparams: dict[str, Any] | None = None,
) -> UnmanagedStart:
    """Find or create ``owner``'s unmanaged experiment and trial, and start a new run of it.

    The same ``external_experiment_id`` (per owner) finds the same experiment; with it, the same
    ``external_trial_id`` finds the same trial, which is resumed: reopened ACTIVE if it had
    ended, its previous run (if still RUNNING) ended as superseded, the new run's reports
    continuing its metrics. Without external ids every call makes a new experiment; with only
    ``external_experiment_id``, a new trial in it (Determined's grouping of runs as one
    search). A found experiment keeps its stored config (the one sent is validated, not stored).

    Raises:
        InvalidInput: (400) a bad config (see ``unmanaged_config``), ``external_trial_id``
            without ``external_experiment_id``, ids that are not short strings, ``hparams``
            not a mapping.
        PayloadTooLarge: (413) ``hparams`` over ``HEADWAY_MAX_CONFIG_BYTES`` as JSON.
        IllegalTransition: (409) the external experiment id names a managed experiment or one
            being deleted.
    """
    experiment_key = _external_id(external_experiment_id, "external_experiment_id")
    trial_key = _external_id(external_trial_id, "external_trial_id")
    if trial_key and not experiment_key:
        raise InvalidInput(
            {"external_trial_id": ["Needs external_experiment_id (trial ids are per experiment)."]}
        )
    if hparams is not None and not isinstance(hparams, dict):
        raise InvalidInput({"hparams": ["Must be a mapping of hyperparameter names to values."]})
    problem = json_storage_problem(hparams)
    if problem is not None:
        raise InvalidInput({"hparams": [problem]})
    # Stored on the trial and shown in every trial answer: no larger than a config may be.
    check_json_size(hparams or {}, field="hparams", setting="HEADWAY_MAX_CONFIG_BYTES")
    config = unmanaged_config(config_source)
    experiment = _experiment(owner, config, experiment_key)
    with transaction.atomic():
        trial, resumed = _trial(experiment, trial_key, hparams or {})
        trial = lock_trial(trial.id)
        run = _new_run(trial)
        refresh_experiment(experiment.id)
    steps = None
    if trial.latest_checkpoint is not None:
        steps = (
            Checkpoint.objects.filter(uuid=trial.latest_checkpoint)
            .values_list("steps_completed", flat=True)
            .first()
        )
    experiment.refresh_from_db()
    return UnmanagedStart(
        experiment=experiment,
        trial=trial,
        run=run,
        resumed=resumed,
        latest_checkpoint=str(trial.latest_checkpoint) if trial.latest_checkpoint else None,
        latest_checkpoint_steps=steps,
    )


def _experiment(owner: Any, config: ExperimentConfig, key: str) -> Experiment:
    data = config.to_dict()
    # A resumed experiment stays where it is; the names are still checked (400 naming them).
    project = resolve_config_project(user=owner, workspace=config.workspace, project=config.project)
    fields = {
        "project": project,
        "name": config.name,
        "description": config.description,
        "labels": list(config.labels),
        "config": data,
        "model_definition": b"",
        "unmanaged": True,
        "searcher_state": {"created": True},
    }
    if not key:
        return Experiment.objects.create(owner=owner, **fields)
    try:
        with transaction.atomic():
            experiment, _ = Experiment.objects.get_or_create(
                owner=owner, external_id=key, defaults=fields
            )
    except IntegrityError:  # made by a racing call between its get and its insert
        experiment = Experiment.objects.get(owner=owner, external_id=key)
    if not experiment.unmanaged or experiment.state in DELETION_STATES:
        raise IllegalTransition(
            f"external_experiment_id {key!r} names experiment {experiment.id}, which is "
            f"{'being deleted' if experiment.unmanaged else 'not unmanaged'}"
        )
    return experiment


def _trial(experiment: Experiment, key: str, hparams: dict[str, Any]) -> tuple[Trial, bool]:
    """The experiment's trial for ``key`` (found: resumed) or a new one. The experiment is not
    locked here: trials are locked before their experiment (``registry.lifecycle``)."""
    if key:
        found = Trial.objects.filter(experiment=experiment, external_id=key).first()
        if found is not None:
            return found, True
    fields = {"hparams": hparams, "seed": random.SystemRandom().randrange(2**31)}
    try:
        with transaction.atomic():
            trial = Trial.objects.create(experiment=experiment, external_id=key, **fields)
    except IntegrityError:  # the same key made by a racing call: resume that trial
        return Trial.objects.get(experiment=experiment, external_id=key), True
    # The searcher's name for it: unique in the experiment without counting its trials.
    Trial.objects.filter(id=trial.id).update(request_id=str(trial.id))
    return trial, False


def _new_run(trial: Trial) -> TrialRun:
    """End the trial's live run (superseded), reopen the trial and start run ``run_id + 1``."""
    now = timezone.now()
    previous = (
        TrialRun.objects.select_for_update(no_key=True)
        .filter(trial=trial, run_id=trial.run_id)
        .exclude(state=RunState.EXITED)
        .first()
    )
    run_id = trial.run_id + 1
    if previous is not None:
        previous.state, previous.ended_at = RunState.EXITED, now
        previous.save(update_fields=["state", "ended_at"])
        TrialLog.objects.create(
            trial_id=trial.id,
            run_id=previous.run_id,
            message=f"[headway] run {previous.run_id} superseded by run {run_id}",
        )
    run = TrialRun.objects.create(
        trial=trial, run_id=run_id, state=RunState.RUNNING, started_at=now, pool="", worker=""
    )
    UnmanagedRun.objects.create(run=run, heartbeat_at=now)
    trial.run_id = run_id
    fields = ["run_id"]
    if trial.state != State.ACTIVE:
        trial.state, trial.ended_at = State.ACTIVE, None
        fields += ["state", "ended_at"]
    trial.save(update_fields=fields)
    # save(), not a bulk UPDATE, so that reopening an ended experiment reaches the model's
    # signals (webhooks' experiment.state_changed) like every other state change.
    experiment = (
        Experiment.objects.select_for_update(no_key=True)
        .without_blobs()
        .filter(id=trial.experiment_id)
        .exclude(state=State.ACTIVE)
        .first()
    )
    if experiment is not None:
        experiment.state, experiment.ended_at = State.ACTIVE, None
        experiment.save(update_fields=["state", "ended_at"])
    return run


def unmanaged_heartbeat(*, trial_id: int, run_id: int) -> bool:
    """Record that unmanaged run ``run_id`` of ``trial_id`` is alive; False when it has ended
    (or is no unmanaged run)."""
    return bool(
        UnmanagedRun.objects.filter(run__trial_id=trial_id, run__run_id=run_id)
        .exclude(run__state=RunState.EXITED)
        .update(heartbeat_at=timezone.now())
    )


def unmanaged_append_logs(*, trial_id: int, run_id: int, lines: Sequence[LogLine]) -> int | None:
    """Store the output lines the script of unmanaged run ``run_id`` sent as the trial's logs,
    each once (``store_lines``: a line at or below the run's highest stored ``position`` is a
    resend). Returns how many were stored, or None when there is no such unmanaged run.

    Raises:
        IllegalTransition: the run has ended (closed, superseded or lost).
    """
    run = TrialRun.objects.filter(trial_id=trial_id, run_id=run_id, unmanaged__isnull=False).first()
    if run is None:
        return None
    if run.state == RunState.EXITED:
        raise IllegalTransition(f"Run {run_id} of trial {trial_id} has ended.")
    return store_lines(run, trial_id, run_id, lines)


def unmanaged_run_exited(*, trial_id: int, run_id: int, exit_code: int | None) -> Trial | None:
    """End unmanaged run ``run_id``: exit 0 (``close()``) → COMPLETED, another code (an
    exception in the script) or None (lost) → ERROR; a trial being canceled or killed ends
    CANCELED. A run that already ended changes nothing (a retried report). Returns the trial,
    or None when there is no such unmanaged run."""
    return _end_run(trial_id, run_id, exit_code, None)[0]


def _end_run(
    trial_id: int, run_id: int, exit_code: int | None, lost_before: Any
) -> tuple[Trial | None, bool]:
    """``unmanaged_run_exited``; also leaves alone a run that heartbeated at or after
    ``lost_before`` (the reaper's cutoff). Returns the trial and whether this call ended it."""
    with transaction.atomic():
        run = (
            TrialRun.objects.filter(trial_id=trial_id, run_id=run_id, unmanaged__isnull=False)
            .values_list("id", flat=True)
            .first()
        )
        if run is None:
            return None, False
        trial = lock_trial(trial_id)
        # Only the run's row: PostgreSQL refuses FOR UPDATE of the outer join's nullable side.
        row = (
            TrialRun.objects.select_for_update(of=("self",), no_key=True)
            .select_related("unmanaged")
            .get(id=run)
        )
        if row.state == RunState.EXITED:
            return trial, False
        if lost_before is not None and row.unmanaged.heartbeat_at >= lost_before:
            return trial, False  # it heartbeated after the reaper looked
        row.state, row.exit_code, row.ended_at = RunState.EXITED, exit_code, timezone.now()
        row.save(update_fields=["state", "exit_code", "ended_at"])
        if trial.run_id != run_id or trial.state in TERMINAL_STATES:
            return trial, True
        if trial.state in STOPPING:
            trial_end(trial, State.CANCELED)
        else:
            trial_end(trial, State.COMPLETED if exit_code == 0 else State.ERROR)
        refresh_experiment(trial.experiment_id)
    return trial, True


def heartbeat_timeout() -> timedelta:
    """``HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS``: how long an unmanaged run may go
    without a heartbeat before it is lost."""
    return timedelta(seconds=settings.HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS)


def reap_lost_unmanaged_runs(*, timeout: timedelta | None = None) -> list[tuple[int, int]]:
    """End as lost (trial ERROR) the unmanaged runs with no heartbeat for ``timeout`` (default
    ``heartbeat_timeout()``); return their ``(trial_id, run_id)`` pairs.

    Safe to run from several places at once: each run is ended under its trial's lock, only if
    it still has not heartbeated since the cutoff.
    """
    timeout = heartbeat_timeout() if timeout is None else timeout
    cutoff = timezone.now() - timeout
    stale = list(
        UnmanagedRun.objects.filter(heartbeat_at__lt=cutoff)
        .exclude(run__state=RunState.EXITED)
        .values_list("run__trial_id", "run__run_id")
    )
    reaped = []
    for trial_id, run_id in stale:
        trial, ended = _end_run(trial_id, run_id, None, cutoff)
        if trial is not None and ended:
            reaped.append((trial_id, run_id))
            message = f"unmanaged run {run_id} lost: no heartbeat for {timeout.total_seconds():g} s"
            logger.warning("trial %s: %s", trial_id, message)
            TrialLog.objects.create(
                trial_id=trial_id, run_id=run_id, message=f"[headway] {message}"
            )
    return reaped
