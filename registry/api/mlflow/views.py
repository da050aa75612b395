"""``/api/2.0/mlflow/<endpoint>``: the endpoints of MLflow's tracking service its client calls.

One view routes the path to a handler (``ROUTES``); each handler takes the caller and the
request's fields (a GET's query, a POST's JSON) and returns the JSON answer MLflow's server
would (``mlflow/protos/service.proto``). Endpoints of MLflow's service that Headway does not
map (run deletion, datasets, MLflow's model registry, traces, ...) answer ``NOT_IMPLEMENTED``
naming them; paths MLflow does not have answer ``ENDPOINT_NOT_FOUND``. Authentication is a
Headway user token, sent by the client from ``MLFLOW_TRACKING_TOKEN`` as
``Authorization: Bearer <token>`` (``Token <token>`` works too); a trial's run token is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import JsonResponse
from rest_framework import exceptions
from rest_framework.views import APIView

from registry.api.authentication import HeadwayTokenAuthentication
from registry.api.mlflow import reads, store
from registry.api.mlflow.entities import RUN_NAME_TAG, experiment_json
from registry.api.mlflow.errors import MlflowError, invalid, to_response
from registry.api.parsers import BoundedJSONParser
from registry.api.permissions import trial_run_of
from registry.authz import NotPermitted

# Endpoints of MLflow's service (or families of them) that are not mapped, and why.
NOT_MAPPED = {
    "runs/delete": "Headway keeps every trial of an experiment; delete the experiment instead",
    "runs/restore": "runs are not deleted one by one (see runs/delete)",
    "experiments/restore": "a deleted Headway experiment cannot be restored",
    "runs/log-inputs": "datasets and inputs are not mapped onto Headway",
    "runs/outputs": "logged models are not mapped onto Headway",
    "runs/log-model": "logged models are not mapped; use Headway checkpoints",
    "experiments/set-experiment-tag": "experiment tags are not mapped; use Headway labels",
    "experiments/delete-experiment-tag": "experiment tags are not mapped",
    "metrics/get-history-bulk-interval": "use metrics/get-history per run",
}
NOT_MAPPED_FAMILIES = {
    "registered-models": "MLflow's model registry is not mapped; use Headway's model registry",
    "model-versions": "MLflow's model registry is not mapped; use Headway's model registry",
    "logged-models": "logged models are not mapped; use Headway checkpoints",
    "traces": "traces are not mapped onto Headway",
    "datasets": "datasets are not mapped onto Headway",
}


class BearerTokenAuthentication(HeadwayTokenAuthentication):
    """Headway's token authentication under the ``Bearer`` keyword (``MLFLOW_TRACKING_TOKEN``)."""

    keyword = "Bearer"


class MlflowAPIView(APIView):
    """The base of the MLflow-compatible views: user tokens, JSON, errors in MLflow's shape."""

    authentication_classes = (BearerTokenAuthentication, HeadwayTokenAuthentication)
    permission_classes = ()  # checked in ``caller``: MLflow's codes, not DRF's
    parser_classes: tuple[Any, ...] = (BoundedJSONParser,)
    # Not in Headway's OpenAPI document: MLflow's service.proto documents these routes.
    schema = None

    def handle_exception(self, exc: Exception) -> Any:
        return to_response(exc)

    @staticmethod
    def caller(request: Any) -> Any:
        """The request's user; raises 401 without a user token, 403 for a run token."""
        if not (request.user and request.user.is_authenticated):
            raise exceptions.NotAuthenticated(
                "Send a Headway user token: MLFLOW_TRACKING_TOKEN=<token>."
            )
        if trial_run_of(request) is not None:
            raise NotPermitted("A trial's run token cannot use the MLflow API; use a user token.")
        return request.user


def _fields(request: Any) -> dict[str, Any]:
    if request.method == "GET":
        query = request.query_params
        return {
            key: (query.getlist(key) if key.endswith("_ids") else query.get(key)) for key in query
        }
    data = request.data
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.")
    return data


def _run_id(fields: dict[str, Any]) -> Any:
    return fields.get("run_id") or fields.get("run_uuid")


def _run(trial: Any) -> dict[str, Any]:
    return reads.runs_json([trial])[0]


def create_experiment(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    if f.get("tags"):
        raise invalid("Experiment tags are not mapped onto Headway; create it without tags.")
    made = store.create_experiment(user, f.get("name"), f.get("artifact_location"))
    return {"experiment_id": str(made.id)}


def get_experiment(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    return {"experiment": experiment_json(store.experiment(user, f.get("experiment_id")))}


def get_experiment_by_name(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    name = f.get("experiment_name")
    found = store.by_name(user, name) if isinstance(name, str) else None
    if found is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with name '{name}'"
        )
    return {"experiment": experiment_json(found)}


def update_experiment(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    store.rename_experiment(user, store.experiment(user, f.get("experiment_id")), f.get("new_name"))
    return {}


def delete_experiment(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    store.delete_experiment(user, store.experiment(user, f.get("experiment_id")))
    return {}


def create_run(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    tags = {t.get("key"): t.get("value") for t in f.get("tags") or [] if isinstance(t, dict)}
    run_name = f.get("run_name") or tags.get(RUN_NAME_TAG)
    trial = store.create_run(user, store.experiment(user, f.get("experiment_id")), run_name, tags)
    return {"run": _run(trial)}


def get_run(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    return {"run": _run(store.trial(user, _run_id(f)))}


def update_run(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    trial = store.trial(user, _run_id(f))
    if f.get("run_name"):
        store.log_batch(user, trial, [], [], [{"key": RUN_NAME_TAG, "value": f["run_name"]}])
    store.end_run(user, trial, f.get("status"))
    return {"run_info": _run(store.trial(user, trial.id))["info"]}


def log_metric(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    metric = {k: f.get(k) for k in ("key", "value", "timestamp", "step")}
    store.log_batch(user, store.trial(user, _run_id(f)), [metric], [], [])
    return {}


def log_param(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    param = {"key": f.get("key"), "value": f.get("value")}
    store.log_batch(user, store.trial(user, _run_id(f)), [], [param], [])
    return {}


def set_tag(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    tag = {"key": f.get("key"), "value": f.get("value")}
    store.log_batch(user, store.trial(user, _run_id(f)), [], [], [tag])
    return {}


def delete_tag(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    store.delete_tag(user, store.trial(user, _run_id(f)), f.get("key"))
    return {}


def _items(f: dict[str, Any], name: str) -> list[dict[str, Any]]:
    items = f.get(name) or []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise invalid(f"{name} must be a list of objects.")
    return items


def log_batch(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    trial = store.trial(user, _run_id(f))
    store.log_batch(user, trial, _items(f, "metrics"), _items(f, "params"), _items(f, "tags"))
    return {}


def search_runs(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    return reads.search_runs(user, f)


def search_experiments(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    return reads.search_experiments(user, f)


def get_metric_history(user: Any, f: dict[str, Any]) -> dict[str, Any]:
    trial = store.trial(user, _run_id(f))
    return reads.metric_history(
        trial, f.get("metric_key"), f.get("max_results"), f.get("page_token")
    )


Handler = Callable[[Any, dict[str, Any]], dict[str, Any]]
ROUTES: dict[tuple[str, str], Handler] = {
    ("experiments/create", "POST"): create_experiment,
    ("experiments/get", "GET"): get_experiment,
    ("experiments/get-by-name", "GET"): get_experiment_by_name,
    ("experiments/search", "POST"): search_experiments,
    ("experiments/search", "GET"): search_experiments,
    ("experiments/update", "POST"): update_experiment,
    ("experiments/delete", "POST"): delete_experiment,
    ("runs/create", "POST"): create_run,
    ("runs/get", "GET"): get_run,
    ("runs/update", "POST"): update_run,
    ("runs/search", "POST"): search_runs,
    ("runs/log-metric", "POST"): log_metric,
    ("runs/log-parameter", "POST"): log_param,
    ("runs/set-tag", "POST"): set_tag,
    ("runs/delete-tag", "POST"): delete_tag,
    ("runs/log-batch", "POST"): log_batch,
    ("metrics/get-history", "GET"): get_metric_history,
}
_PATHS = {path for path, _ in ROUTES}


class MlflowServiceView(MlflowAPIView):
    """Every ``/api/2.0/mlflow/<endpoint>`` request, routed by ``ROUTES``."""

    def _route(self, request: Any, endpoint: str) -> JsonResponse:
        user = self.caller(request)
        endpoint = endpoint.strip("/")
        handler = ROUTES.get((endpoint, request.method))
        if handler is None:
            why = NOT_MAPPED.get(endpoint) or NOT_MAPPED_FAMILIES.get(endpoint.split("/", 1)[0])
            if why is not None:
                raise MlflowError(
                    "NOT_IMPLEMENTED", f"{endpoint} is not supported by Headway: {why}."
                )
            if endpoint in _PATHS:
                allowed = sorted(m for p, m in ROUTES if p == endpoint)
                raise MlflowError(
                    "ENDPOINT_NOT_FOUND",
                    f"{endpoint} takes {' or '.join(allowed)}, not {request.method}.",
                )
            raise MlflowError(
                "ENDPOINT_NOT_FOUND", f"No MLflow endpoint {endpoint!r} on this server."
            )
        return JsonResponse(handler(user, _fields(request)))

    def get(self, request: Any, endpoint: str) -> JsonResponse:
        return self._route(request, endpoint)

    def post(self, request: Any, endpoint: str) -> JsonResponse:
        return self._route(request, endpoint)

    def patch(self, request: Any, endpoint: str) -> JsonResponse:
        return self._route(request, endpoint)

    def delete(self, request: Any, endpoint: str) -> JsonResponse:
        return self._route(request, endpoint)
