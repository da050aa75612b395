"""``/api/v1/trials/{id}/``: the trial, and the endpoints its SDK calls with a trial token."""

from collections.abc import Callable

from django.db.models import Count
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response

from headway.client import _wire as wire
from registry import lifecycle, metrics
from registry.api.answers import answer
from registry.api.params import int_param, int_query_parameter
from registry.api.permissions import trial_run_of
from registry.api.prefer import PREFER_PARAMETER, minimal, prefers_minimal
from registry.api.report_serializers import (
    EarlyExitSerializer,
    PreemptAckSerializer,
    ProgressSerializer,
    SearcherCompletedSerializer,
    TrialLogPageSerializer,
    TrialLogSerializer,
)
from registry.api.schema import openapi_30
from registry.api.serializers import (
    RUN_ID_MAX,
    CheckpointRegisterSerializer,
    CheckpointSerializer,
    ContinueTrialSerializer,
    ExperimentSerializer,
    TrialSerializer,
)
from registry.api.views.checkpoint_lists import CHECKPOINT_LIST_PARAMETERS, checkpoint_list_response
from registry.api.views.edits import TrialPatchMixin
from registry.api.views.metrics import SERIES_PARAMETERS, series_params
from registry.api.views.search_params import TRIAL_SEARCH_PARAMETERS, searched, trial_page
from registry.api.views.trial_summary import TrialSummaryMixin
from registry.authz import ensure_can_change_trial, ensure_can_write_trial_data, scoped
from registry.errors import InvalidInput
from registry.models import Experiment, Trial, TrialLog
from registry.path_converters import DatabaseIdConverter
from registry.preemption import wait_for_stop_request
from registry.search import Target


def _trial_pk(pk: str | None) -> int:
    """The trial id from the URL; 404 (as get_object would) when it is not an integer or
    larger than any database id (SQLite's driver would raise OverflowError: a 500)."""
    try:
        return DatabaseIdConverter().to_python(pk or "")
    except ValueError:
        raise Http404("No Trial matches the given query.") from None


TRIAL_MAX_POINTS = 2000
LOG_CURSOR_MAX = 2**62
LOG_LIMIT_MAX = 10_000
PREEMPT_WAIT_MAX = 60


# What the request schema cannot say (OpenAPI 3.0 has no propertyNames, nor sums).
CHECKPOINT_REGISTER_DESCRIPTION = (
    "Register a checkpoint of this trial. Each key of `resources` is a safe canonical relative "
    "file path (not empty, not absolute, no backslash, NUL, `..`, `.` or empty segment), and the "
    "sizes, each at most 2^63-1 bytes, must also add up to at most 2^63-1 (the checkpoint's size), "
    "else a 400 naming resources. 201 for a new registration, 200 when the same one is "
    "registered again."
)


class TrialViewSet(
    TrialPatchMixin, TrialSummaryMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    serializer_class = TrialSerializer
    queryset = Trial.objects.with_run_state().select_related("experiment")
    # Actions a trial token may call (for its own trial only, checked in get_object).
    allow_trial_token = (
        "retrieve",
        "summary_metrics",
        "metrics",
        "checkpoints",
        "preempt",
        "preempt_ack",
        "progress",
        "searcher_completed",
        "searcher_early_exit",
    )

    @extend_schema(parameters=TRIAL_SEARCH_PARAMETERS, responses=TrialSerializer(many=True))
    def list(self, request):
        """Trials of every experiment (not those being deleted), by id unless ``order_by``
        says otherwise; ``filter`` finds them by results across experiments (docs/search.md)."""
        trials = self.get_queryset().not_deleted()
        return trial_page(self, searched(request, trials.order_by("id"), Target.TRIAL))

    def get_queryset(self):
        # A run token reads its own trial only (get_object checks it), whatever its owner's
        # roles are now; users see the trials of the workspaces they have a role in.
        if trial_run_of(self.request) is not None:
            return super().get_queryset()
        return scoped(super().get_queryset(), self.request.user)

    def get_object(self) -> Trial:
        # DRF's get_object_or_404: a non-integer id is a 404, not Django's ValueError (a 500).
        trial = get_object_or_404(self.get_queryset(), pk=self.kwargs["pk"])
        run = trial_run_of(self.request)
        if run is not None and run.trial_id != trial.id:
            raise PermissionDenied(f"This trial token may only access trial {run.trial_id}.")
        return trial

    def _writer_check(self, trial_id: int) -> Callable[[Trial], None]:
        """For the writes that lock the trial row anyway (metrics, checkpoint registration):
        a run token of another trial is refused now, without a query; the returned check runs
        on the locked row (its experiment loaded), so a user's access costs no fetch of its own.

        Raises:
            NotPermitted: a run token of another trial (now), or a user who does not own the
                trial (when the returned check runs).
        """
        run = trial_run_of(self.request)
        run_trial_id = run.trial_id if run else None
        if run_trial_id is not None:
            ensure_can_write_trial_data(self.request.user, trial_id, run_trial_id=run_trial_id)
        user = self.request.user

        def authorize(trial: Trial) -> None:
            ensure_can_write_trial_data(user, trial.id, run_trial_id=run_trial_id)

        return authorize

    def _writable_trial(self) -> Trial:
        """``get_object`` for the SDK's writes: the trial's own run token or its owner
        (``registry.authz.ensure_can_write_trial_data``), else 403."""
        trial = self.get_object()
        run = trial_run_of(self.request)
        ensure_can_write_trial_data(
            self.request.user, trial.id, run_trial_id=run.trial_id if run else None
        )
        return trial

    @extend_schema(
        methods=["GET"], parameters=SERIES_PARAMETERS, responses={200: wire.TrialMetrics}
    )
    @extend_schema(
        methods=["POST"],
        request={"application/json": openapi_30(metrics.report_batch_json_schema())},
        responses={200: wire.MetricsAccepted},
    )
    @action(detail=True, methods=["get", "post"])
    def metrics(self, request, pk=None):
        if request.method == "POST":
            # The hot path of every trial: metrics_report locks the trial row anyway, so
            # access is checked on that row (authorize), without a fetch of its own.
            trial_id = _trial_pk(pk)
            run = trial_run_of(request)
            authorize = self._writer_check(trial_id)
            # Validate the JSON bytes directly (pydantic's parser): a tenth of the cost of
            # DRF's json.loads then validating the Python objects, for 10,000-report batches.
            json_body = request.content_type.startswith("application/json")
            stream = request.stream if json_body else None
            reports = metrics.parse_reports(stream.read() if stream else request.data)
            try:
                accepted = metrics.metrics_report(
                    trial_id=trial_id,
                    reports=reports,
                    run_id=run.run_id if run else None,
                    authorize=authorize,
                )
            except Trial.DoesNotExist:
                raise Http404("No Trial matches the given query.") from None
            return answer(wire.MetricsAccepted, {"accepted": accepted})
        trial = self.get_object()
        params = series_params(request, default_max_points=TRIAL_MAX_POINTS)
        series = metrics.read_series(trial_id=trial.id, **params)
        # exclude_unset: a series' optional lists (min/max, epochs...) stay absent when unread.
        return answer(
            wire.TrialMetrics, {"trial_id": trial.id, "series": series}, exclude_unset=True
        )

    @extend_schema(
        methods=["GET"],
        parameters=CHECKPOINT_LIST_PARAMETERS,
        responses=CheckpointSerializer(many=True),
    )
    @extend_schema(
        methods=["POST"],
        request=CheckpointRegisterSerializer,
        parameters=[PREFER_PARAMETER],
        description=CHECKPOINT_REGISTER_DESCRIPTION,
        # 201 for a new registration, 200 when the same one is registered again; with
        # Prefer: return=minimal, the body is wire.CheckpointRegistered.
        responses={200: CheckpointSerializer, 201: CheckpointSerializer},
    )
    @action(detail=True, methods=["get", "post"])
    def checkpoints(self, request, pk=None):
        if request.method == "POST":
            # Like metrics: checkpoint_register locks the trial, access is checked on that row.
            trial_id = _trial_pk(pk)
            authorize = self._writer_check(trial_id)
            data = CheckpointRegisterSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            run = trial_run_of(request)
            run_id = data.validated_data.get("run_id")
            if run is not None and run_id is not None and run_id != run.run_id:
                # The registering run is the token's, never one named in the request.
                raise InvalidInput(
                    {"run_id": [f"This token belongs to run {run.run_id}, not run {run_id}."]}
                )
            try:
                checkpoint, created = lifecycle.checkpoint_register(
                    trial_id=trial_id,
                    uuid=data.validated_data["uuid"],
                    steps_completed=data.validated_data["steps_completed"],
                    run_id=run_id if run_id is not None else (run.run_id if run else None),
                    resources=data.validated_data["resources"],
                    metadata=data.validated_data["metadata"],
                    authorize=authorize,
                )
            except Trial.DoesNotExist:
                raise Http404("No Trial matches the given query.") from None
            code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
            if prefers_minimal(request):
                registered = {
                    "uuid": str(checkpoint.uuid),
                    "trial_id": checkpoint.trial_id,
                    "steps_completed": checkpoint.steps_completed,
                    "state": checkpoint.state,
                }
                return minimal(answer(wire.CheckpointRegistered, registered, status=code))
            return Response(CheckpointSerializer(checkpoint).data, status=code)
        trial = self.get_object()
        return checkpoint_list_response(
            self, trial.checkpoints.all(), default_order=("-steps_completed", "-created_at")
        )

    @extend_schema(
        parameters=[
            int_query_parameter("after", lo=0, hi=LOG_CURSOR_MAX, description="Lines after this."),
            int_query_parameter("limit", lo=1, hi=LOG_LIMIT_MAX, description="At most this many."),
        ],
        responses=TrialLogPageSerializer,
    )
    @action(detail=True, methods=["get"])
    def logs(self, request, pk=None):
        trial = self.get_object()
        after = int_param(request, "after", 0, lo=0, hi=LOG_CURSOR_MAX)
        limit = int_param(request, "limit", 1000, lo=1, hi=LOG_LIMIT_MAX)
        lines = list(TrialLog.objects.filter(trial=trial, id__gt=after).order_by("id")[:limit])
        return Response(
            {
                "results": TrialLogSerializer(lines, many=True).data,
                "last_id": lines[-1].id if lines else after,
                "trial_state": trial.state,
            }
        )

    @extend_schema(
        parameters=[
            int_query_parameter("run_id", lo=0, hi=RUN_ID_MAX, description="Default: current."),
            int_query_parameter("timeout", lo=0, hi=PREEMPT_WAIT_MAX, description="Seconds."),
        ],
        responses={200: wire.ShouldPreempt},
    )
    @action(detail=True, methods=["get"])
    def preempt(self, request, pk=None):
        """``{"should_preempt": bool}``; with ``?timeout=S`` waits up to S s (<= 60) for a stop."""
        trial = self.get_object()
        run = trial_run_of(request)
        default_run = run.run_id if run else trial.run_id
        run_id = int_param(request, "run_id", default_run, lo=0, hi=RUN_ID_MAX)
        timeout = int_param(request, "timeout", 0, lo=0, hi=PREEMPT_WAIT_MAX)
        stop = wait_for_stop_request(trial.id, run_id, timeout)
        return answer(wire.ShouldPreempt, {"should_preempt": stop})

    @extend_schema(request=PreemptAckSerializer, responses={200: wire.PreemptAcknowledged})
    @action(detail=True, methods=["post"], url_path="preempt/ack")
    def preempt_ack(self, request, pk=None):
        """The process checkpointed after a stop request; its exit 0 means "resume me later"."""
        trial = self._writable_trial()
        data = PreemptAckSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        acknowledged = lifecycle.trial_preempt_acknowledge(
            trial_id=trial.id, run_id=data.validated_data["run_id"]
        )
        return answer(wire.PreemptAcknowledged, {"acknowledged": acknowledged})

    def _control(self, service):
        trial = self.get_object()
        ensure_can_change_trial(self.request.user, trial.id)
        trial = service(trial_id=trial.id)
        return Response(TrialSerializer(self.get_queryset().get(id=trial.id)).data)

    @extend_schema(request=None, responses=TrialSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        """Checkpoint and stop this trial (also one trial inside a search)."""
        return self._control(lifecycle.trial_pause)

    @extend_schema(request=None, responses=TrialSerializer)
    @action(detail=True, methods=["post"])
    def activate(self, request, pk=None):
        """Resume a paused trial from its latest checkpoint (same trial, next run)."""
        return self._control(lifecycle.trial_activate)

    @extend_schema(request=None, responses=TrialSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop this trial gracefully with a checkpoint; it ends CANCELED."""
        return self._control(lifecycle.trial_cancel)

    @extend_schema(request=None, responses=TrialSerializer)
    @action(detail=True, methods=["post"])
    def kill(self, request, pk=None):
        """Terminate this trial's process now (SIGTERM, then SIGKILL); it ends CANCELED."""
        return self._control(lifecycle.trial_kill)

    @extend_schema(request=ContinueTrialSerializer, responses={201: ExperimentSerializer})
    @action(detail=True, methods=["post"], url_path="continue")
    def continue_trial(self, request, pk=None):
        """A new single-trial experiment warm-started from this trial's checkpoint (the trial's
        owner or an admin)."""
        trial = self.get_object()
        ensure_can_change_trial(request.user, trial.id)
        data = ContinueTrialSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        experiment = lifecycle.trial_continue(
            trial_id=trial.id,
            owner=request.user,
            checkpoint_uuid=data.validated_data.get("checkpoint"),
            max_length=data.validated_data.get("max_length"),
            hparams=data.validated_data.get("hparams"),
        )
        body = ExperimentSerializer(
            Experiment.objects.annotate(num_trials=Count("trials")).get(id=experiment.id)
        ).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=ProgressSerializer, responses={200: wire.ProgressRecorded})
    @action(detail=True, methods=["post"])
    def progress(self, request, pk=None):
        trial = self._writable_trial()
        data = ProgressSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        lifecycle.trial_report_progress(trial_id=trial.id, progress=data.validated_data["progress"])
        return answer(wire.ProgressRecorded, {"progress": data.validated_data["progress"]})

    @extend_schema(request=SearcherCompletedSerializer, responses={200: wire.OperationRecorded})
    @action(detail=True, methods=["post"], url_path="searcher/completed")
    def searcher_completed(self, request, pk=None):
        """Report a completed searcher operation; the answer's ``next_length`` (or null) is the
        length of the trial's next operation."""
        trial = self._writable_trial()
        data = SearcherCompletedSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = trial_run_of(request)
        next_length = lifecycle.trial_searcher_completed(
            trial_id=trial.id, run_id=run.run_id if run else None, **data.validated_data
        )
        return answer(wire.OperationRecorded, {"recorded": True, "next_length": next_length})

    @extend_schema(request=EarlyExitSerializer, responses={200: wire.EarlyExitRecorded})
    @action(detail=True, methods=["post"], url_path="searcher/early_exit")
    def searcher_early_exit(self, request, pk=None):
        """Report that the trial leaves its search early (``reason``: errored, user_canceled,
        invalid_hp); the searcher hears it when the trial ends."""
        trial = self._writable_trial()
        data = EarlyExitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        trial = lifecycle.trial_report_early_exit(
            trial_id=trial.id, reason=data.validated_data["reason"]
        )
        return answer(wire.EarlyExitRecorded, {"early_exit": trial.early_exit})
