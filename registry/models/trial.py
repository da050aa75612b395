"""``Trial`` (one hparams setting trained over possibly many runs) and ``TrialRun`` (one launch)."""

import secrets
from typing import ClassVar

from django.db import models
from django.utils import timezone

from registry.models.states import DELETED_STATES, TERMINAL_STATES, RunState, State, StopReason


class TrialQuerySet(models.QuerySet):
    def not_deleted(self) -> "TrialQuerySet":
        """Leave out the trials of experiments being deleted or deleted, as
        ``Experiment.objects.not_deleted()`` leaves out those experiments."""
        return self.exclude(experiment__state__in=DELETED_STATES)

    def with_run_state(self) -> "TrialQuerySet":
        """Annotate ``run_state``: the state of each trial's current run, in the same query."""
        current = TrialRun.objects.filter(
            trial=models.OuterRef("pk"), run_id=models.OuterRef("run_id")
        )
        return self.annotate(run_state=models.Subquery(current.values("state")[:1]))


class Trial(models.Model):
    experiment = models.ForeignKey(
        "registry.Experiment", on_delete=models.CASCADE, related_name="trials"
    )
    # The searcher's id for the "create trial" operation that made this trial.
    request_id = models.CharField(max_length=64, blank=True, default="")
    hparams = models.JSONField(default=dict)
    # Markdown, edited by the experiment's owner (dashboard notes box, PATCH); rendered sanitised.
    notes = models.TextField(blank=True, default="")
    seed = models.BigIntegerField(default=0)
    state = models.CharField(max_length=32, choices=State.choices, default=State.ACTIVE)
    # Number of the current (latest) run; 0 before the first launch.
    run_id = models.PositiveIntegerField(default=0)
    restarts = models.PositiveIntegerField(default=0)
    steps_completed = models.PositiveBigIntegerField(default=0)
    progress = models.FloatField(default=0.0)
    best_validation = models.FloatField(null=True, blank=True)
    latest_checkpoint = models.UUIDField(null=True, blank=True)
    # For "continue trial": the checkpoint the first run warm-starts from.
    warm_start_checkpoint = models.UUIDField(null=True, blank=True)
    # {group: {name: {"last", "last_step", "min", "max", "count"}}}; kept by registry.metrics.
    summary_metrics = models.JSONField(default=dict)
    # The searcher's latest operation for this trial: train until ``searcher_length`` (in the
    # config's unit); ``searcher_completed_length`` is how far the trial reported completing.
    # An operation is pending while the first exceeds the second.
    searcher_length = models.PositiveBigIntegerField(null=True, blank=True)
    searcher_completed_length = models.PositiveBigIntegerField(default=0)
    # The searcher closed the trial: no further operation will come (Determined's Close).
    searcher_closed = models.BooleanField(default=False)
    # Why the trial left the search early ("" = it did not): an EarlyExitReason value.
    early_exit = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Why the trial's queued run is not placed on a host ("" when nothing stands in the way),
    # e.g. no alive host has enough slots; kept by registry.scheduling.
    scheduling_message = models.CharField(max_length=500, blank=True, default="")
    # Runs lost in a row before their ranks started (reset when a run starts): the trial ends
    # ERROR at the experiment's max_lost_before_start (registry.lifecycle._lost).
    lost_before_start = models.PositiveIntegerField(default=0)
    # An unmanaged trial's ``external_trial_id`` (unique in its experiment, "" = none): a rerun
    # of the script with the same id resumes this trial (registry.lifecycle._unmanaged).
    external_id = models.CharField(max_length=256, blank=True, default="")
    # Key/value labels of the trial (string to string): an MLflow run's tags
    # (registry/api/mlflow/), ``mlflow.runName`` its run name.
    labels = models.JSONField(default=dict, blank=True)

    objects = TrialQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["id"]
        indexes: ClassVar[list[models.Index]] = [
            # Each placement pass clears the messages of trials no longer waiting: only the few
            # trials with a message are scanned.
            models.Index(
                fields=["id"],
                condition=~models.Q(scheduling_message=""),
                name="trial_with_scheduling_message",
            ),
            # The trial lists' filters (registry.search) count and join trials by id without
            # reading the wide rows (hparams and summary_metrics make them ~1.3 kB): an
            # index-only scan answers id, experiment and state (docs/decisions/metrics.md).
            models.Index(fields=["id"], include=["experiment", "state"], name="trial_list_cover"),
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["experiment", "external_id"],
                condition=~models.Q(external_id=""),
                name="unique_external_trial_per_experiment",
            ),
        ]

    def __str__(self) -> str:
        return f"Trial {self.id} of experiment {self.experiment_id}"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


def _new_token() -> str:
    return secrets.token_hex(20)


class TrialRun(models.Model):
    """One launch of a trial's process; its token authorises the SDK for that trial only."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="runs")
    run_id = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    token = models.CharField(max_length=40, unique=True, default=_new_token)
    worker = models.CharField(max_length=255, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    # Why the process must stop (StopReason; NONE = keep going); the SDK's should_preempt()
    # reads it, the worker enforces KILL.
    stop_requested = models.CharField(
        max_length=16, blank=True, choices=StopReason.choices, default=StopReason.NONE
    )
    # The process checkpointed and acknowledged the stop: its exit 0 means "resume me later".
    preempt_acknowledged = models.BooleanField(default=False)
    # The operation length this run was last told (cluster info at start, or the answer to a
    # report): an operation issued later is the next run's to train.
    searcher_length = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The resource pool the run was queued for (the experiment's resources.resource_pool): only
    # that pool's hosts run it.
    pool = models.CharField(max_length=200, blank=True, default="default")
    # The HEADWAY_QUEUE of the registry that queued it: only hosts of that namespace run it.
    namespace = models.CharField(max_length=200, blank=True, default="")
    # Placement (registry.scheduling): the host, slot count and device ids this run holds until
    # it is EXITED; no host while it waits for free slots.
    host = models.ForeignKey(
        "registry.WorkerHost",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    slots = models.PositiveIntegerField(default=0)
    devices = models.JSONField(default=list, blank=True)
    # The experiment's resources as the placement pass reads them, copied from its validated
    # config when the run is queued (registry.scheduling.schedule_run), so a pass never decodes
    # configs: slots_per_trial (None: the stored config did not validate; the run is not
    # placed and its trial says why), priority and max_slots.
    slots_needed = models.PositiveIntegerField(null=True, blank=True)
    priority = models.PositiveSmallIntegerField(default=42)
    max_slots = models.PositiveIntegerField(null=True, blank=True)
    # The back-off after a loss before start: neither placed nor submitted before this time
    # (None: at once).
    not_before = models.DateTimeField(null=True, blank=True)
    # The highest output position (a line number or byte offset: LogLineRequestSerializer)
    # whose line of the chief's part is stored: a resent log batch stores only lines past it.
    log_position = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering: ClassVar[list[str]] = ["trial_id", "run_id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["trial", "run_id"], name="unique_run_per_trial"),
        ]
        indexes: ClassVar[list[models.Index]] = [
            # What a placement pass scans (registry.scheduling): the queue in its order...
            models.Index(
                fields=["namespace", "priority", "created_at", "id"],
                condition=models.Q(state=RunState.QUEUED, host__isnull=True),
                name="run_queue_order",
            ),
            # ...and the runs holding slots (placed, not EXITED), without the EXITED history.
            models.Index(
                fields=["host"],
                condition=models.Q(host__isnull=False) & ~models.Q(state=RunState.EXITED),
                name="run_holding_slots",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.run_id} of trial {self.trial_id} ({self.state})"
