"""``/api/v1/unmanaged/``: runs a script starts itself (``headway.experimental.core_v2``).

``POST unmanaged/`` (a user token) finds or creates the user's unmanaged experiment and trial by
their external ids and starts a new run, RUNNING at once, with a trial-scoped run token; the
script then reports through the trial routes like any trial's process. ``heartbeat/``,
``logs/`` (the script's output, the trial's logs) and ``exit/`` take the run's token (or its
owner's). See registry.lifecycle._unmanaged.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.views import APIView

from headway.client._wire import LogsAccepted
from headway.client._wire_unmanaged import UnmanagedExited, UnmanagedHeartbeat, UnmanagedStarted
from registry import lifecycle
from registry.api.answers import answer
from registry.api.host_agent_serializers import LogBatchRequestSerializer
from registry.api.model_serializers import StrictCharField, StrictSerializer
from registry.api.permissions import trial_run_of
from registry.authz import NotPermitted, ensure_can_write_trial_data
from registry.errors import IllegalTransition
from registry.lifecycle._unmanaged import heartbeat_timeout
from registry.models import TrialRun

TAG = ["unmanaged runs"]


class UnmanagedStartSerializer(StrictSerializer):
    """The body of ``POST unmanaged/`` (documentation; the lifecycle validates the values)."""

    config = serializers.DictField(
        help_text="name, description, labels, data, searcher (single), checkpoint_storage"
    )
    external_experiment_id = StrictCharField(required=False, allow_null=True, max_length=256)
    external_trial_id = StrictCharField(required=False, allow_null=True, max_length=256)
    hparams = serializers.DictField(required=False, allow_null=True)


class UnmanagedExitSerializer(StrictSerializer):
    exit_code = serializers.IntegerField(
        min_value=-(2**31), max_value=2**31 - 1, help_text="0: COMPLETED; another: ERROR"
    )


class UnmanagedStartView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Start an unmanaged run",
        request=UnmanagedStartSerializer,
        responses={201: UnmanagedStarted},
    )
    def post(self, request):
        """Find or create the user's unmanaged experiment (``external_experiment_id``) and
        trial (``external_trial_id``: the same id resumes it) and start a new run; 400 naming
        the field for a bad config or id, 409 for an id naming an experiment being deleted."""
        serializer = UnmanagedStartSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        started = lifecycle.unmanaged_start(
            owner=request.user,
            config_source=data["config"],
            external_experiment_id=data.get("external_experiment_id"),
            external_trial_id=data.get("external_trial_id"),
            hparams=data.get("hparams"),
        )
        timeout = heartbeat_timeout().total_seconds()
        body = {
            "experiment_id": started.experiment.id,
            "trial_id": started.trial.id,
            "run_id": started.run.run_id,
            "token": started.run.token,
            "resumed": started.resumed,
            "hparams": started.trial.hparams,
            "trial_seed": started.trial.seed,
            "config": started.experiment.config,
            "latest_checkpoint": started.latest_checkpoint,
            "latest_checkpoint_steps": started.latest_checkpoint_steps,
            "heartbeat_interval_s": timeout / 4,
        }
        return answer(UnmanagedStarted, body, status=201)


class _RunView(APIView):
    """The run's own token (``allow_trial_token``) or its owner's token."""

    allow_trial_token = ("run",)
    action = "run"  # what IsUserOrTrialScoped matches against allow_trial_token

    def check_run(self, request, trial_id: int, run_id: int) -> None:
        """Refuse another trial's run token (403), a user who does not own the trial (403),
        and a run that is not an unmanaged run of that trial (404)."""
        run = trial_run_of(request)
        if run is not None and run.run_id != run_id:
            raise NotPermitted(f"This run token may only act for run {run.run_id}.")
        ensure_can_write_trial_data(
            request.user, trial_id, run_trial_id=run.trial_id if run else None
        )
        exists = TrialRun.objects.filter(
            trial_id=trial_id, run_id=run_id, unmanaged__isnull=False
        ).exists()
        if not exists:
            raise NotFound(f"Trial {trial_id} has no unmanaged run {run_id}.")


class UnmanagedHeartbeatView(_RunView):
    @extend_schema(
        tags=TAG,
        summary="Heartbeat of an unmanaged run",
        request=None,
        responses={200: UnmanagedHeartbeat},
    )
    def post(self, request, trial_id: int, run_id: int):
        """The run is alive; 409 once it has ended (closed, superseded or lost)."""
        self.check_run(request, trial_id, run_id)
        if not lifecycle.unmanaged_heartbeat(trial_id=trial_id, run_id=run_id):
            raise IllegalTransition(f"Run {run_id} of trial {trial_id} has ended.")
        stop = (
            TrialRun.objects.filter(trial_id=trial_id, run_id=run_id)
            .values_list("stop_requested", flat=True)
            .first()
        )
        return answer(UnmanagedHeartbeat, {"stop_requested": stop or ""})


class UnmanagedExitView(_RunView):
    @extend_schema(
        tags=TAG,
        summary="End an unmanaged run",
        request=UnmanagedExitSerializer,
        responses={200: UnmanagedExited},
    )
    def post(self, request, trial_id: int, run_id: int):
        """End the run: exit code 0 completes its trial, another ends it ERROR (a trial being
        canceled or killed ends CANCELED); repeating it changes nothing."""
        self.check_run(request, trial_id, run_id)
        serializer = UnmanagedExitSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        trial = lifecycle.unmanaged_run_exited(
            trial_id=trial_id, run_id=run_id, exit_code=serializer.validated_data["exit_code"]
        )
        if trial is None:
            raise NotFound(f"Trial {trial_id} has no unmanaged run {run_id}.")
        trial.refresh_from_db(fields=["state"])
        return answer(UnmanagedExited, {"trial_state": trial.state})


class UnmanagedLogsView(_RunView):
    @extend_schema(
        tags=TAG,
        summary="Append an unmanaged run's output lines",
        request=LogBatchRequestSerializer,
        responses={200: LogsAccepted},
    )
    def post(self, request, trial_id: int, run_id: int):
        """The script's stdout/stderr lines become the trial's logs (as a host's batch: NUL-free,
        cut at HEADWAY_MAX_LOG_LINE_CHARS, a line at or below the run's highest stored
        ``position`` skipped as a resend); 409 once the run has ended."""
        self.check_run(request, trial_id, run_id)
        serializer = LogBatchRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        lines = [
            (line["message"], line["timestamp"], line["position"])
            for line in serializer.validated_data["lines"]
        ]
        count = lifecycle.unmanaged_append_logs(trial_id=trial_id, run_id=run_id, lines=lines)
        if count is None:
            raise NotFound(f"Trial {trial_id} has no unmanaged run {run_id}.")
        return answer(LogsAccepted, {"accepted": count})
