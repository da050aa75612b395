"""``/api/v1/experiments/``: create, list, describe; their trials, checkpoints, model definition."""

from django.db.models import Count
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from headway.client import _wire as wire
from registry import lifecycle, metrics
from registry.api.answers import answer
from registry.api.params import (
    TEXT_PATTERN,
    bool_param,
    int_list_param,
    int_query_parameter,
    single_value,
    text_param,
)
from registry.api.permissions import ensure_owner_or_staff
from registry.api.schema import ErrorSerializer
from registry.api.serializers import (
    CheckpointSerializer,
    ExperimentCreateSerializer,
    ExperimentSerializer,
    TrialSerializer,
)
from registry.api.views.checkpoint_lists import CHECKPOINT_LIST_PARAMETERS, checkpoint_list_response
from registry.api.views.edits import ExperimentPatchMixin
from registry.api.views.metrics import SERIES_PARAMETERS, series_params, series_response
from registry.api.views.places import PLACE_PARAMETERS, filter_by_place
from registry.api.views.search_params import (
    TRIAL_SEARCH_PARAMETERS,
    searched,
    trial_page,
)
from registry.api.workspace_serializers import ExperimentMoveSerializer
from registry.authz import scoped
from registry.errors import IllegalTransition, InvalidInput
from registry.hparam_importance import importance_answer
from registry.models import Checkpoint, Experiment, State
from registry.scheduling import experiment_scheduling_message
from registry.search import Target
from registry.workspaces import experiment_move

# Overview charts draw one line per trial: 100 points each keeps 100 trials x 3 metrics
# under 1 MB (docs/performance.md).
EXPERIMENT_MAX_POINTS = 100


# The stored answer of ``registry.hparam_importance.run_fit`` (docs/rest-api.md).
HPARAM_IMPORTANCE_RESPONSE = inline_serializer(
    "HparamImportance",
    {
        "experiment_id": serializers.IntegerField(),
        "metric": serializers.CharField(),
        "trials": serializers.IntegerField(help_text="Trials with a value of the metric, used."),
        "method": serializers.ChoiceField(choices=["random_forest"]),
        "hparams_varying": serializers.IntegerField(
            help_text="Hyperparameters that vary between those trials; at most 100 are fitted"
            " and listed: those most associated with the metric on their own."
        ),
        "hparams": inline_serializer(
            "HparamImportanceEntry",
            {
                "name": serializers.CharField(),
                "type": serializers.ChoiceField(choices=["numeric", "categorical"]),
                "importance": serializers.FloatField(min_value=0, max_value=1),
                "correlation": serializers.FloatField(allow_null=True),
            },
            many=True,
        ),
    },
)

# While the fit of the current trial set is queued or running (with Retry-After).
HPARAM_IMPORTANCE_QUEUED = inline_serializer(
    "HparamImportanceQueued",
    {
        "detail": serializers.CharField(),
        "state": serializers.ChoiceField(choices=["queued", "running"]),
    },
)


class ExperimentViewSet(
    ExperimentPatchMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = ExperimentSerializer

    def get_queryset(self):
        if self.action == "metrics":
            # The chart data needs the experiment's id only: the list's annotations (a trial
            # count and the scheduling message) cost ~140 ms at 1,000 trials (SQLite).
            return scoped(Experiment.objects.only("id", "owner_id"), self.request.user)
        if self.action == "hparam_importance":
            # The fit needs the searcher metric (config) only, not the list's annotations.
            return scoped(Experiment.objects.only("id", "owner_id", "config"), self.request.user)
        qs = (
            Experiment.objects.select_related("owner", "project__workspace")
            .without_blobs()
            .annotate(
                num_trials=Count("trials"), scheduling_message=experiment_scheduling_message()
            )
            .order_by("-id")
        )
        qs = scoped(qs, self.request.user)
        if self.action != "list":
            return qs
        state = single_value(self.request, "state")
        if state is not None:
            if state not in State.values:
                raise InvalidInput(
                    {"state": [f"Unknown state; allowed: {', '.join(State.values)}."]}
                )
            qs = qs.filter(state=state)
        else:
            # Experiments being deleted are hidden unless asked for by state (DELETE_FAILED
            # ones stay visible: the user has to act on them).
            qs = qs.not_deleted()
        archived = bool_param(self.request, "archived")
        if archived is not None:
            qs = qs.filter(archived=archived)
        return searched(self.request, filter_by_place(self.request, qs), Target.EXPERIMENT)

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, enum=State.values, description="Only this state."),
            OpenApiParameter("archived", str, enum=["true", "false"], description="Archived?"),
            *PLACE_PARAMETERS,
            *TRIAL_SEARCH_PARAMETERS,
        ]
    )
    def list(self, request, *args, **kwargs):
        """Newest first (``?order_by=`` sorts otherwise); experiments being deleted only when
        asked for by ``state``."""
        return super().list(request, *args, **kwargs)

    @extend_schema(request=ExperimentCreateSerializer, responses={201: ExperimentSerializer})
    def create(self, request):
        """Create an experiment from its config (a mapping or YAML text) and its model
        definition (a base64 tar.gz holding the config's entrypoint): 400 naming the field
        when the config is not a valid experiment config or the archive lacks the entrypoint,
        413 when the archive is over its size limit."""
        data = ExperimentCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        experiment = lifecycle.experiment_create(
            owner=request.user,
            config_source=data.validated_data["config"],
            model_definition=data.validated_data["model_definition"],
        )
        experiment = self.get_queryset().get(id=experiment.id)
        return Response(ExperimentSerializer(experiment).data, status=status.HTTP_201_CREATED)

    def _control(self, request, pk, service):
        experiment = self.get_object()
        ensure_owner_or_staff(
            request,
            experiment.owner_id,
            f"experiment {experiment.id}",
            experiment.project.workspace_id,
        )
        experiment = service(experiment_id=experiment.id)
        return Response(ExperimentSerializer(self.get_queryset().get(id=experiment.id)).data)

    @extend_schema(request=None, responses=ExperimentSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        """Pause every running trial: each checkpoints and stops; ``activate`` resumes them."""
        return self._control(request, pk, lifecycle.experiment_pause)

    @extend_schema(request=None, responses=ExperimentSerializer)
    @action(detail=True, methods=["post"])
    def activate(self, request, pk=None):
        """Resume a paused experiment's trials from their latest checkpoints."""
        return self._control(request, pk, lifecycle.experiment_activate)

    @extend_schema(request=None, responses=ExperimentSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop every trial gracefully with a checkpoint; the experiment ends CANCELED."""
        return self._control(request, pk, lifecycle.experiment_cancel)

    @extend_schema(request=None, responses=ExperimentSerializer)
    @action(detail=True, methods=["post"])
    def kill(self, request, pk=None):
        """Terminate every trial's process now; the experiment ends CANCELED."""
        return self._control(request, pk, lifecycle.experiment_kill)

    @extend_schema(request=None, responses=ExperimentSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request, pk=None):
        return self._control(request, pk, lifecycle.experiment_archive)

    @extend_schema(request=None, responses=ExperimentSerializer)
    @action(detail=True, methods=["post"])
    def unarchive(self, request, pk=None):
        return self._control(request, pk, lifecycle.experiment_unarchive)

    @extend_schema(request=ExperimentMoveSerializer, responses=ExperimentSerializer)
    @action(detail=True, methods=["post"])
    def move(self, request, pk=None):
        """Move into another project (``{"project": id}``; owner or admin): 400 naming
        ``project`` when it is unknown or archived (or its workspace is)."""
        experiment = self.get_object()
        ensure_owner_or_staff(
            request,
            experiment.owner_id,
            f"experiment {experiment.id}",
            experiment.project.workspace_id,
        )
        data = ExperimentMoveSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        experiment_move(
            experiment_id=experiment.id,
            project_id=data.validated_data["project"],
            user=request.user,
        )
        return Response(ExperimentSerializer(self.get_queryset().get(id=experiment.id)).data)

    @extend_schema(parameters=TRIAL_SEARCH_PARAMETERS, responses=TrialSerializer(many=True))
    @action(detail=True, methods=["get"])
    def trials(self, request, pk=None):
        experiment = self.get_object()
        trials = searched(request, experiment.trials.with_run_state().order_by("id"), Target.TRIAL)
        return trial_page(self, trials)

    @extend_schema(
        parameters=[
            *SERIES_PARAMETERS,
            int_query_parameter(
                "trial_id", lo=0, hi=2**63 - 1, many=True, description="Only these trials."
            ),
        ],
        responses={200: wire.ExperimentMetrics},
    )
    @action(detail=True, methods=["get"])
    def metrics(self, request, pk=None):
        """One series per trial and metric, for the experiment's overview charts.

        Shaped as ``wire.ExperimentMetrics`` but written by orjson straight from the read's
        dicts, not validated through the model: for 1,000 trials that would triple the
        encoding's cost (docs/performance.md "chart data"); tests validate it instead."""
        experiment = self.get_object()
        params = series_params(request, default_max_points=EXPERIMENT_MAX_POINTS)
        trial_ids = int_list_param(request, "trial_id", lo=0, hi=2**63 - 1)
        series = metrics.read_experiment_series(
            experiment_id=experiment.id, trial_ids=trial_ids, **params
        )
        return series_response({"experiment_id": experiment.id, "series": series})

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "metric",
                {"type": "string", "pattern": TEXT_PATTERN},
                description=(
                    "A validation metric some trial reported (else 400 naming metric);"
                    " default: the searcher metric."
                ),
            )
        ],
        responses={
            200: HPARAM_IMPORTANCE_RESPONSE,
            202: HPARAM_IMPORTANCE_QUEUED,
            400: ErrorSerializer,
            409: ErrorSerializer,
            422: ErrorSerializer,
            429: ErrorSerializer,
        },
    )
    @action(detail=True, methods=["get"], url_path="hparam-importance")
    def hparam_importance(self, request, pk=None):
        """Importance of each hyperparameter for a metric (random forest, as W&B computes it),
        fitted once per trial set in the master's worker: 200 with the stored result, 202
        while it is computed, 429 while every fit slot is busy (both with Retry-After), 422
        when its fit failed, 409 while fewer than 5 trials have a value (docs/rest-api.md)."""
        experiment = self.get_object()
        result = importance_answer(experiment, text_param(request, "metric"))
        headers = {"Retry-After": str(result.retry_after)} if result.retry_after else None
        return Response(result.body, status=result.status, headers=headers)

    @extend_schema(parameters=CHECKPOINT_LIST_PARAMETERS, responses=CheckpointSerializer(many=True))
    @action(detail=True, methods=["get"])
    def checkpoints(self, request, pk=None):
        experiment = self.get_object()
        return checkpoint_list_response(
            self, Checkpoint.objects.filter(trial__experiment=experiment)
        )

    @extend_schema(request=None, responses={202: wire.CheckpointGCQueued})
    @action(detail=True, methods=["post"], url_path="checkpoints/gc")
    def checkpoints_gc(self, request, pk=None):
        """Run checkpoint GC now (retention policy, failed deletions, orphaned files); owner
        or staff. The pass runs in a Celery task: 202."""
        experiment = self.get_object()
        ensure_owner_or_staff(
            request,
            experiment.owner_id,
            f"experiment {experiment.id}",
            experiment.project.workspace_id,
        )
        if experiment.is_deleted:
            raise IllegalTransition(f"experiment {experiment.id} is {experiment.state}")
        lifecycle.request_checkpoint_gc(experiment.id)
        return answer(
            wire.CheckpointGCQueued,
            {"detail": f"Checkpoint GC of experiment {experiment.id} queued."},
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(request=None, responses={202: ExperimentSerializer})
    def destroy(self, request, pk=None):
        """Delete an ended experiment (owner or staff): DELETING, then a Celery task deletes its
        stored checkpoints and its rows. 409 while it runs or when a model version holds one of
        its checkpoints."""
        experiment = self.get_object()
        ensure_owner_or_staff(
            request,
            experiment.owner_id,
            f"experiment {experiment.id}",
            experiment.project.workspace_id,
        )
        lifecycle.experiment_delete(experiment_id=experiment.id, user=request.user)
        return Response(
            ExperimentSerializer(self.get_queryset().get(id=experiment.id)).data,
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(responses={(200, "application/gzip"): bytes})
    @action(detail=True, methods=["get"], url_path="model_definition")
    def model_definition(self, request, pk=None):
        experiment = Experiment.objects.only("id", "model_definition").get(id=self.get_object().id)
        response = HttpResponse(bytes(experiment.model_definition), content_type="application/gzip")
        response["Content-Disposition"] = f'attachment; filename="experiment-{pk}-model.tar.gz"'
        return response
